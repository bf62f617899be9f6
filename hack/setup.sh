#!/usr/bin/env bash
# Installs what the project needs on a fresh machine, idempotently: the Debian packages the
# scripts use (only when missing), the wasm32-wasip2 Rust target for the guest and the
# x86_64-unknown-linux-musl one for the image's static binary, and the Go-built local control
# plane, helm, Toxiproxy (the fault tests' proxy), the image tools (crane, the OCI registry the
# image round trip and the guest-by-reference tests use, and its htpasswd helper) and the example
# guests' build tools (componentize-py from PyPI, ComponentizeJS from npm), cached under
# ~/.cache/app-operator; a warm run does no Go, pip or npm work.
#
# Usage: hack/setup.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

log() { echo "[setup.sh] $*" >&2; }
die() {
  echo "[setup.sh] error: $*" >&2
  exit 1
}

# Commands the scripts need, and the Debian package that provides each.
declare -A DEBIAN_PACKAGES=(
  [openssl]=openssl
  [curl]=curl
  [flock]=util-linux
  [setsid]=util-linux
  [ps]=procps
  [sha256sum]=coreutils
  # The engine-free image (hack/image.sh, hack/image-test.sh): ring's C code for musl, strip and
  # readelf, the manifest checks, running the binary as the image's user.
  [musl-gcc]=musl-tools
  [strip]=binutils
  [readelf]=binutils
  [jq]=jq
  [setpriv]=util-linux
)

install_debian_packages() {
  local cmd missing=()
  for cmd in "${!DEBIAN_PACKAGES[@]}"; do
    command -v "$cmd" >/dev/null || missing+=("${DEBIAN_PACKAGES[$cmd]}")
  done
  ((${#missing[@]} == 0)) && return
  log "installing Debian packages: ${missing[*]}"
  [[ "$(id -u)" == 0 ]] || die "need root to install ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

install_rust_targets() {
  command -v rustup >/dev/null || die "rustup is not installed"
  local target
  for target in wasm32-wasip2 x86_64-unknown-linux-musl; do
    if ! rustup target list --installed | grep -qx "$target"; then
      log "adding the $target Rust target"
      rustup target add "$target"
    fi
  done
}

check_python_node() {
  command -v python3 >/dev/null || die "python3 is not installed; the Python example guest needs it"
  command -v npm >/dev/null || die "node and npm are not installed; the JavaScript example guest needs them"
}

check_go() {
  command -v go >/dev/null || die "go is not installed; the control plane needs Go >= 1.26"
}

# The Go build cache is only of use while a Go binary is built, and the binaries above are cached
# by version: a warm run builds nothing. Left alone it held 6.9 GB here after the control plane,
# the registry, the fault proxy and the benchmark's Go peer were built, beside the 4.8 GB of Rust
# a cold `make test` builds on the same disk. A build after a version bump compiles from the
# module cache (kept) again.
trim_go_build_cache() {
  (
    # shellcheck source=hack/controlplane/lib.sh
    source "$ROOT/hack/controlplane/lib.sh"
    cp_go_env
    local mib
    mib="$(du -sm "$GOCACHE" 2>/dev/null | cut -f1)"
    ((${mib:-0} >= 64)) || exit 0
    log "emptying the Go build cache ($mib MiB, $GOCACHE)"
    go clean -cache
  )
}

main() {
  install_debian_packages
  install_rust_targets
  check_go
  check_python_node
  "$ROOT/hack/controlplane/build.sh" >/dev/null
  "$ROOT/hack/controlplane/build-helm.sh" >/dev/null
  "$ROOT/hack/controlplane/build-toxiproxy.sh" >/dev/null
  "$ROOT/hack/guests/install-tools.sh" >/dev/null
  "$ROOT/hack/controlplane/build-imagetools.sh" >/dev/null
  trim_go_build_cache
  log "ok"
}

main "$@"
