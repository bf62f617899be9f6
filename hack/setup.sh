#!/usr/bin/env bash
# Installs what the project needs on a fresh machine, idempotently: the Debian packages the
# scripts use (only when missing), the wasm32-wasip2 Rust target for the guest, and the Go-built
# local control plane and helm (cached under ~/.cache/app-operator; a warm run does no Go work).
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

install_rust_target() {
  command -v rustup >/dev/null || die "rustup is not installed"
  if ! rustup target list --installed | grep -qx wasm32-wasip2; then
    log "adding the wasm32-wasip2 Rust target"
    rustup target add wasm32-wasip2
  fi
}

check_go() {
  command -v go >/dev/null || die "go is not installed; the control plane needs Go >= 1.26"
}

main() {
  install_debian_packages
  install_rust_target
  check_go
  "$ROOT/hack/controlplane/build.sh" >/dev/null
  "$ROOT/hack/controlplane/build-helm.sh" >/dev/null
  log "ok"
}

main "$@"
