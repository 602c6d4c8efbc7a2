#!/usr/bin/env bash
# Java for the Spark tests (tests/data: pyspark in local mode needs a JRE 17+). Debian/Ubuntu,
# runs as root. Idempotent: when java is on PATH it does nothing.
set -euo pipefail

if command -v java >/dev/null 2>&1; then
  echo "java: $(java -version 2>&1 | head -1) already installed"
  exit 0
fi
echo "java: installing default-jre-headless"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q default-jre-headless
echo "java: $(java -version 2>&1 | head -1)"
