#!/usr/bin/env bash
# Builds the local control plane from Go modules: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl and kwok, plus kwok's stages file.
#
# The versions are pinned by the committed wrapper modules in k8s/, etcd/ and kwok/ (go.mod and
# go.sum only). Binaries are built into a temporary directory and moved atomically into
# $APP_OPERATOR_CACHE/bin/<key> (default ~/.cache/app-operator), where <key> names the versions
# and hashes the wrapper modules and the Go version. A complete cache entry is reused as is, so a
# warm run does no Go work. Prints the binary directory on stdout.
#
# Usage: hack/controlplane/build.sh
set -euo pipefail

# shellcheck source=hack/controlplane/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# The kwok stages, from the module source, that make fake nodes and pods live: nodes become
# Ready and keep a lease, pods become Ready, Job pods complete, deleted pods go away.
KWOK_STAGES=(
  node/fast/node-initialize.yaml
  node/heartbeat-with-lease/node-heartbeat-with-lease.yaml
  pod/fast/pod-ready.yaml
  pod/fast/pod-complete.yaml
  pod/fast/pod-delete.yaml
)

# Version ldflags for the Kubernetes binaries, so that /version and `kubectl version` report the
# real version instead of v0.0.0-master. The build date is fixed to keep builds reproducible.
k8s_ldflags() {
  local version="$1" major minor flags="-s -w" pkg
  major="$(echo "${version#v}" | cut -d. -f1)"
  minor="$(echo "${version#v}" | cut -d. -f2)"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$flags"
}

# Builds the four Kubernetes commands into $1 (they share most packages, so one `go build`).
build_k8s() {
  local out="$1" version
  version="$(cp_mod_version k8s k8s.io/kubernetes)"
  cp_log "building kube-apiserver, kube-controller-manager, kube-scheduler, kubectl $version"
  (cd "$CP_DIR/k8s" && go build -trimpath -tags=selinux,notest -ldflags="$(k8s_ldflags "$version")" \
    -o "$out/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)
}

# Builds etcd into $1. Its main package is the module root, so the output is named explicitly.
build_etcd() {
  local out="$1" version
  version="$(cp_mod_version etcd go.etcd.io/etcd/server/v3)"
  cp_log "building etcd $version"
  (cd "$CP_DIR/etcd" && go build -trimpath \
    -ldflags="-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$version" \
    -o "$out/etcd" go.etcd.io/etcd/server/v3)
}

# Builds kwok into $1 and writes $1/kwok-stages.yaml from the stages in the kwok module source.
build_kwok() {
  local out="$1" version dir stage
  version="$(cp_mod_version kwok sigs.k8s.io/kwok)"
  cp_log "building kwok $version"
  (cd "$CP_DIR/kwok" && go build -trimpath -ldflags="-s -w" -o "$out/kwok" sigs.k8s.io/kwok/cmd/kwok)
  dir="$(cd "$CP_DIR/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)"
  [[ -d "$dir/kustomize/stage" ]] || cp_die "kwok stages not found in $dir"
  for stage in "${KWOK_STAGES[@]}"; do
    echo "---"
    cat "$dir/kustomize/stage/$stage"
  done >"$out/kwok-stages.yaml"
}

# Checks that every binary runs and reports the expected version, and records the versions.
check_outputs() {
  local out="$1" k8s
  k8s="$(cp_mod_version k8s k8s.io/kubernetes)"
  "$out/kube-apiserver" --version | grep -qx "Kubernetes $k8s" ||
    cp_die "kube-apiserver does not report $k8s: $("$out/kube-apiserver" --version)"
  {
    "$out/kube-apiserver" --version
    "$out/kube-controller-manager" --version
    "$out/kube-scheduler" --version
    "$out/kubectl" version --client
    "$out/etcd" --version
    "$out/kwok" --version 2>&1 || echo "kwok $(cp_mod_version kwok sigs.k8s.io/kwok)"
    go version
  } >"$out/VERSIONS"
}

# Builds every component into OUT: build_all OUT.
build_all() {
  build_etcd "$1"
  build_kwok "$1"
  build_k8s "$1"
  check_outputs "$1"
}

main() {
  command -v go >/dev/null || cp_die "go is not installed (hack/setup.sh installs what is needed)"
  cp_go_env
  local bin
  bin="$(cp_bin_dir)"
  cp_cached_build "$bin" control-plane build_all
  echo "$bin"
}

main "$@"
