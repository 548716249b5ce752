#!/usr/bin/env bash
# Builds a real Kubernetes control plane and KEDA from the Go module proxy, for the e2e lane
# (test/e2e): etcd, kube-apiserver, kube-controller-manager, kubectl, KEDA's operator and its
# metrics apiserver (adapter), at pinned versions, into .tools/control-plane/<versions>/bin
# (.tools/control-plane/current points there).
#
# k8s.io/kubernetes is not meant to be required as a dependency: it is built from a scratch
# module that requires it and replaces each of its staging modules (k8s.io/api, …) by the
# published module of the same release. KEDA is built from a second scratch module that
# copies KEDA's own replace lines.
#
# A cold build takes ~25 minutes on 2 cores. The binaries are kept in a cache outside the
# clone (${XDG_CACHE_HOME:-$HOME/.cache}/dfe-keda-shim/control-plane/<versions>), so a fresh
# clone on the same machine links them in seconds; the Go build cache speeds up a rebuild.
# Idempotent: a binary already built at these versions is not built again.
# Tries every binary, then exits 1 if any could not be built.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

KUBERNETES_VERSION=v1.35.4
# The etcd release Kubernetes $KUBERNETES_VERSION pins.
ETCD_VERSION=v3.6.5
KEDA_VERSION=v2.20.2

versions="k8s-$KUBERNETES_VERSION.etcd-$ETCD_VERSION.keda-$KEDA_VERSION"
tools_root="$PWD/.tools/control-plane"
tools_dir="$tools_root/$versions"
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/dfe-keda-shim/control-plane"
cache_dir="$cache_root/$versions"
mkdir -p "$tools_dir/bin" "$cache_dir/bin" || exit 1

say() { printf '[control-plane] %s\n' "$*"; }
status=0
fail() { say "$*"; status=1; }

binaries=(etcd kube-apiserver kube-controller-manager kubectl keda-operator keda-adapter)

# have NAME: the binary is in the cache, complete (written last, under its final name).
have() { [ -x "$cache_dir/bin/$1" ]; }

all_cached() {
  local name
  for name in "${binaries[@]}"; do have "$name" || return 1; done
}

if ! all_cached; then
  if ! command -v go >/dev/null 2>&1; then
    say "go not found: cannot build the control plane"
    exit 1
  fi
  export CGO_ENABLED=0
  src="$cache_root/src"
  mkdir -p "$src"

  # module_dir MODULE@VERSION: download a module, print its directory in the module cache.
  module_dir() {
    (cd /tmp && GOFLAGS=-mod=mod go mod download -json "$1") \
      | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'
  }

  # build NAME MODULE_DIR PACKAGE LDFLAGS: go build PACKAGE into the cache as NAME.
  build() {
    local name=$1 dir=$2 package=$3 ldflags=$4 started
    if have "$name"; then
      say "$name already built"
      return 0
    fi
    started=$(date +%s)
    say "building $name ($package)"
    if (cd "$dir" && go build -trimpath -ldflags "-s -w $ldflags" -o "$cache_dir/bin/.$name.partial" "$package"); then
      mv "$cache_dir/bin/.$name.partial" "$cache_dir/bin/$name"
      say "$name built in $(($(date +%s) - started)) s"
    else
      fail "go build $package failed: cannot build $name"
    fi
  }

  # --- Kubernetes and etcd -----------------------------------------------------------------
  build_kubernetes() {
  k8s_src="$src/kubernetes-$KUBERNETES_VERSION-etcd-$ETCD_VERSION"
  if [ ! -s "$k8s_src/go.sum" ]; then
    say "preparing a scratch module for k8s.io/kubernetes@$KUBERNETES_VERSION and etcd $ETCD_VERSION"
    k8s_mod=$(module_dir "k8s.io/kubernetes@$KUBERNETES_VERSION")
    if [ -z "$k8s_mod" ] || [ ! -s "$k8s_mod/go.mod" ]; then
      fail "could not download k8s.io/kubernetes@$KUBERNETES_VERSION"
    else
      rm -rf "$k8s_src" && mkdir -p "$k8s_src"
      staging_version="v0.${KUBERNETES_VERSION#v1.}"
      {
        printf 'module dfe-keda-shim/control-plane-kubernetes\n\ngo 1.25.0\n\n'
        printf 'require (\n\tk8s.io/kubernetes %s\n\tgo.etcd.io/etcd/server/v3 %s\n)\n\n' \
          "$KUBERNETES_VERSION" "$ETCD_VERSION"
        printf 'replace (\n'
        # Every "k8s.io/x => ./staging/src/k8s.io/x" of Kubernetes' go.mod, to the release.
        sed -n 's#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._-]*\) => \./staging/src/.*$#\t\1 => \1 '"$staging_version"'#p' "$k8s_mod/go.mod"
        printf ')\n'
      } >"$k8s_src/go.mod"
      cat >"$k8s_src/tools.go" <<'EOF'
//go:build tools

package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
EOF
      say "$(grep -c ' => ' "$k8s_src/go.mod") staging modules replaced; resolving dependencies"
      (cd "$k8s_src" && go mod tidy) || { fail "go mod tidy failed for the Kubernetes scratch module"; rm -f "$k8s_src/go.sum"; }
    fi
  fi
  if [ -s "$k8s_src/go.sum" ]; then
    minor=${KUBERNETES_VERSION#v1.}
    minor=${minor%%.*}
    k8s_ldflags=""
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      k8s_ldflags="$k8s_ldflags -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
    done
    build etcd "$k8s_src" go.etcd.io/etcd/server/v3 ""
    build kube-apiserver "$k8s_src" k8s.io/kubernetes/cmd/kube-apiserver "$k8s_ldflags"
    build kube-controller-manager "$k8s_src" k8s.io/kubernetes/cmd/kube-controller-manager "$k8s_ldflags"
    build kubectl "$k8s_src" k8s.io/kubernetes/cmd/kubectl "$k8s_ldflags"
  fi

  return "$status"
  }

  # --- KEDA --------------------------------------------------------------------------------
  build_keda() {
  keda_src="$src/keda-$KEDA_VERSION"
  if [ ! -s "$keda_src/go.sum" ]; then
    say "preparing a scratch module for github.com/kedacore/keda/v2@$KEDA_VERSION"
    keda_mod=$(module_dir "github.com/kedacore/keda/v2@$KEDA_VERSION")
    if [ -z "$keda_mod" ] || [ ! -s "$keda_mod/go.mod" ]; then
      fail "could not download github.com/kedacore/keda/v2@$KEDA_VERSION"
    else
      rm -rf "$keda_src" && mkdir -p "$keda_src"
      go_line=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$keda_mod/go.mod")
      {
        printf 'module dfe-keda-shim/control-plane-keda\n\ngo %s\n\n' "${go_line:-1.25.0}"
        printf 'require github.com/kedacore/keda/v2 %s\n\n' "$KEDA_VERSION"
        # KEDA's replace lines (single or in a block), except those to local paths.
        awk '
          /^replace \(/ { block = 1; next }
          block && /^\)/ { block = 0; next }
          block && / => / && $0 !~ /=> \.\.?\// { sub(/^[ \t]+/, ""); print "replace " $0; next }
          /^replace / && $0 !~ /=> \.\.?\// { print }
        ' "$keda_mod/go.mod"
      } >"$keda_src/go.mod"
      cat >"$keda_src/tools.go" <<'EOF'
//go:build tools

package tools

import (
	_ "github.com/kedacore/keda/v2/cmd/adapter"
	_ "github.com/kedacore/keda/v2/cmd/operator"
)
EOF
      say "$(grep -c '^replace' "$keda_src/go.mod") replace line(s) copied from KEDA; resolving dependencies"
      (cd "$keda_src" && go mod tidy) || { fail "go mod tidy failed for the KEDA scratch module"; rm -f "$keda_src/go.sum"; }
    fi
  fi
  if [ -s "$keda_src/go.sum" ]; then
    keda_ldflags="-X github.com/kedacore/keda/v2/version.Version=$KEDA_VERSION"
    build keda-adapter "$keda_src" github.com/kedacore/keda/v2/cmd/adapter "$keda_ldflags"
    build keda-operator "$keda_src" github.com/kedacore/keda/v2/cmd/operator "$keda_ldflags"
  fi
  return "$status"
  }

  # Both at once: on a shared machine two builds get more of the CPU than one, and on an idle
  # one they cost little more than one after the other (each go build uses every core anyway).
  (build_kubernetes 2>&1 | sed -u "s/^/[kubernetes] /") &
  kubernetes_pid=$!
  (build_keda 2>&1 | sed -u "s/^/[keda] /") &
  keda_pid=$!
  wait "$kubernetes_pid" || status=1
  wait "$keda_pid" || status=1

  # KEDA's CRDs, from the same module.
  keda_mod=$(module_dir "github.com/kedacore/keda/v2@$KEDA_VERSION")
  if [ -d "$keda_mod/config/crd/bases" ]; then
    mkdir -p "$cache_dir/keda-crds" && cp "$keda_mod"/config/crd/bases/*.yaml "$cache_dir/keda-crds/" \
      && chmod -R u+w "$cache_dir/keda-crds"
  fi
else
  say "control plane $versions already built in $cache_dir"
fi

# Link the cached binaries into the clone (hard links when on the same filesystem).
for name in "${binaries[@]}"; do
  if have "$name"; then
    if [ ! "$tools_dir/bin/$name" -ef "$cache_dir/bin/$name" ]; then
      rm -f "$tools_dir/bin/$name"
      ln "$cache_dir/bin/$name" "$tools_dir/bin/$name" 2>/dev/null \
        || cp "$cache_dir/bin/$name" "$tools_dir/bin/$name"
    fi
  else
    fail "$name is missing from $cache_dir/bin"
  fi
done
if [ -d "$cache_dir/keda-crds" ]; then
  rm -rf "$tools_dir/keda-crds" && cp -r "$cache_dir/keda-crds" "$tools_dir/keda-crds"
fi
ln -sfn "$versions" "$tools_root/current"
[ "$status" = 0 ] && say "control plane ready in $tools_dir/bin"
exit "$status"
