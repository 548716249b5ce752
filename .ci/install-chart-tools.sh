#!/usr/bin/env bash
# Installs what the chart and packaging tests need, all from package registries:
#   - helm and kubeconform, built with `go install` from the Go module proxy into .tools/bin;
#   - the Kubernetes OpenAPI spec (api/openapi-spec/swagger.json), taken from the
#     k8s.io/kubernetes module on the Go proxy, copied to .tools/openapi/swagger.json
#     (kubeconform's default schema download is not reachable here, so the tests turn
#     this spec into local JSON schemas);
#   - shellcheck from Debian's packages.
# Idempotent: each piece is skipped when already present at the pinned version.
# Tries every piece, then exits 1 if any could not be installed (the tests needing it
# would fail under CI=true anyway; this says why first).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

HELM_VERSION=v3.22.0
# Minor of the k8s.io/client-go that helm $HELM_VERSION is built with (see its go.mod).
HELM_K8S_MINOR=37
KUBECONFORM_VERSION=v0.8.0
# The OpenAPI spec of this Kubernetes release is what core objects are validated against.
KUBERNETES_VERSION=v1.37.2

tools_dir="$PWD/.tools"
bin_dir="$tools_dir/bin"
mkdir -p "$bin_dir" "$tools_dir/openapi"

say() { printf '[chart-tools] %s\n' "$*"; }
status=0
fail() { say "$*"; status=1; }

# go_tool NAME PACKAGE VERSION [LDFLAGS]: build PACKAGE@VERSION into .tools/bin/NAME once.
go_tool() {
  local name=$1 package=$2 version=$3 ldflags=${4:-} stamp="$bin_dir/.$1.version"
  if [ -x "$bin_dir/$name" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$version $ldflags" ]; then
    say "$name $version already built in $bin_dir"
    return 0
  fi
  if ! command -v go >/dev/null 2>&1; then
    fail "go not found: cannot build $name"
    return 1
  fi
  say "building $name $version with go install (takes a few minutes on a cold cache)"
  if GOBIN="$bin_dir" CGO_ENABLED=0 go install -ldflags "$ldflags" "$package@$version"; then
    printf '%s\n' "$version $ldflags" >"$stamp"
    say "$name $version built: $bin_dir/$name"
  else
    fail "go install $package@$version failed: cannot build $name"
  fi
}

# helm's release build stamps its version and the Kubernetes version it assumes by default
# (`.Capabilities.KubeVersion`, the chart's kubeVersion check) with -X; go install does not,
# which would leave Kubernetes v1.20 as the default. Stamp the same as its Makefile does.
helm_ldflags="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
  helm_ldflags="$helm_ldflags -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$HELM_K8S_MINOR"
done
go_tool helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION" "$helm_ldflags"
go_tool kubeconform github.com/yannh/kubeconform/cmd/kubeconform "$KUBECONFORM_VERSION"

spec="$tools_dir/openapi/swagger.json"
spec_stamp="$tools_dir/openapi/.version"
if [ -s "$spec" ] && [ "$(cat "$spec_stamp" 2>/dev/null)" = "$KUBERNETES_VERSION" ]; then
  say "Kubernetes $KUBERNETES_VERSION OpenAPI spec already in $spec"
elif ! command -v go >/dev/null 2>&1; then
  fail "go not found: cannot fetch the Kubernetes $KUBERNETES_VERSION OpenAPI spec"
else
  say "downloading module k8s.io/kubernetes@$KUBERNETES_VERSION for its OpenAPI spec"
  # Outside any module so the project's (absent) go.mod plays no part.
  module_dir=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" \
    | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  if [ -n "$module_dir" ] && [ -s "$module_dir/api/openapi-spec/swagger.json" ]; then
    cp "$module_dir/api/openapi-spec/swagger.json" "$spec" && chmod u+w "$spec" && printf '%s\n' "$KUBERNETES_VERSION" >"$spec_stamp"
    say "OpenAPI spec copied to $spec"
  else
    fail "could not get api/openapi-spec/swagger.json from k8s.io/kubernetes@$KUBERNETES_VERSION"
  fi
fi

if command -v shellcheck >/dev/null 2>&1; then
  say "shellcheck already installed: $(shellcheck --version | sed -n 's/^version: //p')"
elif command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  say "installing shellcheck from Debian's packages"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >/dev/null; } \
    || fail "apt-get install shellcheck failed"
else
  fail "shellcheck missing and apt-get unavailable (or not root)"
fi
exit "$status"
