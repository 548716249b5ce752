#!/usr/bin/env bash
# Installs Debian's clickhouse-server (18.16): an old but real HTTP ClickHouse for
# the transport-level fault tests (test/helpers/clickhouse-server.ts). Tests start
# their own instances on free loopback ports, so the packaged service is never
# started here. Idempotent; when the package cannot be had, says so and exits 1
# (the tests that need it would fail under CI=true).
set -uo pipefail

if command -v clickhouse-server >/dev/null 2>&1 || [ -x /usr/sbin/clickhouse-server ]; then
  echo "clickhouse-server already installed: $(dpkg-query -W -f='${Version}' clickhouse-server 2>/dev/null || echo present)"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "no apt-get on this machine: clickhouse-server not installed"
  exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "not root and no sudo: clickhouse-server not installed"
    exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
# policy-rc.d 101 stops the package's postinst from starting the service; the
# tests run their own servers on free ports with temp data directories.
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null && $SUDO chmod +x "$policy" && created_policy=1
fi

status=0
$SUDO apt-get update -qq || status=$?
if [ "$status" -eq 0 ]; then
  $SUDO apt-get install -y -qq --no-install-recommends clickhouse-server clickhouse-client || status=$?
fi

[ "$created_policy" -eq 1 ] && $SUDO rm -f "$policy"

if [ "$status" -ne 0 ]; then
  echo "apt-get could not install clickhouse-server (exit $status)"
  exit 1
fi
echo "installed clickhouse-server $(dpkg-query -W -f='${Version}' clickhouse-server 2>/dev/null)"
