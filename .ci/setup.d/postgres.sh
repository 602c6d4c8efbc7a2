#!/usr/bin/env bash
# PostgreSQL for the dpbayes.data tests: installs the server (Debian/Ubuntu), starts a
# cluster on 127.0.0.1:5432 and makes a test role and database. Idempotent: run it again
# and it only checks. The tests read DPBAYES_TEST_POSTGRES_URL (default below).
#   role dpbayes / password dpbayes, database dpbayes_test, password login on 127.0.0.1
set -euo pipefail

if ! command -v pg_lsclusters >/dev/null 2>&1 || ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "postgres: installing the server"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q postgresql
fi

version=$(ls /usr/lib/postgresql | sort -n | tail -1)
if ! pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main"' | grep -q .; then
  echo "postgres: creating cluster $version/main"
  pg_createcluster "$version" main -- --auth-local=peer --auth-host=scram-sha-256
fi
if ! pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" && $4 == "online"' | grep -q .; then
  echo "postgres: starting cluster $version/main"
  pg_ctlcluster "$version" main start
fi
port=$(pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" {print $3}')

# wait until it accepts connections (at most ~30 s)
for _ in $(seq 60); do
  if su postgres -c "psql -p $port -Atqc 'SELECT 1'" >/dev/null 2>&1; then break; fi
  sleep 0.5
done

psql_admin() { su postgres -c "psql -p $port -v ON_ERROR_STOP=1 -Atq $*"; }
if [ "$(psql_admin "-c \"SELECT 1 FROM pg_roles WHERE rolname = 'dpbayes'\"")" != "1" ]; then
  psql_admin "-c \"CREATE ROLE dpbayes LOGIN PASSWORD 'dpbayes'\""
fi
if [ "$(psql_admin "-c \"SELECT 1 FROM pg_database WHERE datname = 'dpbayes_test'\"")" != "1" ]; then
  psql_admin "-c \"CREATE DATABASE dpbayes_test OWNER dpbayes\""
fi
echo "postgres: ready at postgresql://dpbayes:dpbayes@127.0.0.1:$port/dpbayes_test"
