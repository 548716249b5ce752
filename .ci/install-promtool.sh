#!/usr/bin/env bash
# Installs promtool (Prometheus' rule and exposition checker) for the monitoring tests:
# built with `go install` from the Go module proxy into .tools/bin, like the chart tools.
# The Go module versions of Prometheus are v0.<major*100+minor>.<patch>: v0.316.0 is
# Prometheus 3.16.0.
# Idempotent: skipped when already built at the pinned version.
# Exits 1 when it cannot be built (the tests needing it would fail under CI=true).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

PROMTOOL_VERSION=v0.316.0
# Prometheus' release build stamps its version with -X (promu); go install does not, which
# leaves `promtool --version` blank. Stamp the same field.
PROMETHEUS_VERSION=3.16.0
ldflags="-X github.com/prometheus/common/version.Version=$PROMETHEUS_VERSION"

bin_dir="$PWD/.tools/bin"
stamp="$bin_dir/.promtool.version"
mkdir -p "$bin_dir"

say() { printf '[promtool] %s\n' "$*"; }

if [ -x "$bin_dir/promtool" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$PROMTOOL_VERSION $ldflags" ]; then
  say "promtool $PROMTOOL_VERSION already built in $bin_dir"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  say "go not found: cannot build promtool"
  exit 1
fi
say "building promtool $PROMTOOL_VERSION with go install (takes several minutes on a cold cache)"
if GOBIN="$bin_dir" CGO_ENABLED=0 go install -ldflags "$ldflags" "github.com/prometheus/prometheus/cmd/promtool@$PROMTOOL_VERSION"; then
  printf '%s\n' "$PROMTOOL_VERSION $ldflags" >"$stamp"
  say "promtool built: $bin_dir/promtool ($("$bin_dir/promtool" --version 2>/dev/null | head -n 1))"
else
  say "go install promtool@$PROMTOOL_VERSION failed"
  exit 1
fi
