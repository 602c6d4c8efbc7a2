#!/usr/bin/env bash
# Chromium and chromedriver for the headless browser test of the service's web page
# (tests/service/test_web_page.py drives /usr/bin/chromium with Playwright). Debian/Ubuntu,
# runs as root. Idempotent: when both binaries exist it does nothing.
set -euo pipefail

if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  echo "chromium: $(/usr/bin/chromium --version 2>/dev/null || echo present) already installed"
  exit 0
fi
echo "chromium: installing chromium and chromium-driver"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q chromium chromium-driver
echo "chromium: $(/usr/bin/chromium --version 2>/dev/null || echo installed)"
