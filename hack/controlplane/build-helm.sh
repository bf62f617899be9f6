#!/usr/bin/env bash
# Builds helm from Go modules, for the chart in charts/app-operator and its tests.
#
# The version is pinned by the committed wrapper module in helm/ (go.mod and go.sum only, with a
# `tool` line for helm.sh/helm/v4/cmd/helm). Like the control plane (build.sh), the binary is built
# into a temporary directory and moved atomically into $APP_OPERATOR_CACHE/bin/<key> (default
# ~/.cache/app-operator), where <key> names the version and hashes the wrapper module and the Go
# version; a complete entry is reused as is, so a warm run does no Go work. Its own cache entry,
# so that bumping helm does not rebuild the control plane. Prints the binary's path on stdout.
#
# Usage: hack/controlplane/build-helm.sh
set -euo pipefail

# shellcheck source=hack/controlplane/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Builds helm into OUT and checks the version it reports: build_helm OUT.
build_helm() {
  local version
  version="$(cp_mod_version helm helm.sh/helm/v4)"
  cp_log "building helm $version"
  (cd "$CP_DIR/helm" && go build -trimpath \
    -ldflags="-s -w -X helm.sh/helm/v4/internal/version.version=$version" \
    -o "$1/helm" helm.sh/helm/v4/cmd/helm)
  "$1/helm" version --short | grep -q "^$version" ||
    cp_die "helm does not report $version: $("$1/helm" version --short)"
}

main() {
  command -v go >/dev/null || cp_die "go is not installed (hack/setup.sh installs what is needed)"
  cp_go_env
  local dir
  dir="$(cp_helm_dir)"
  cp_cached_build "$dir" helm build_helm
  echo "$dir/helm"
}

main "$@"
