#!/usr/bin/env bash
# Builds Toxiproxy's server from Go modules: the TCP fault proxy that the e2e fault tests
# (e2e/tests/faults.rs) put between the operator and the API server, to cut, slow down and
# reset its connections.
#
# The version is pinned by the committed wrapper module in toxiproxy/ (go.mod and go.sum only,
# with a `tool` line for github.com/Shopify/toxiproxy/v2/cmd/server). Like helm (build-helm.sh),
# the binary is built into a temporary directory and moved atomically into
# $APP_OPERATOR_CACHE/bin/<key> (default ~/.cache/app-operator), where <key> names the version and
# hashes the wrapper module and the Go version (cp_toxiproxy_dir); a complete entry is reused as
# is, so a warm run does no Go work. Prints the binary's path on stdout.
#
# Usage: hack/controlplane/build-toxiproxy.sh
set -euo pipefail

# shellcheck source=hack/controlplane/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Builds toxiproxy-server into OUT and checks the version it reports: build_toxiproxy OUT.
build_toxiproxy() {
  local version
  version="$(cp_mod_version toxiproxy github.com/Shopify/toxiproxy/v2)"
  cp_log "building toxiproxy-server $version"
  (cd "$CP_DIR/toxiproxy" && go build -trimpath \
    -ldflags="-s -w -X github.com/Shopify/toxiproxy/v2.Version=$version" \
    -o "$1/toxiproxy-server" github.com/Shopify/toxiproxy/v2/cmd/server)
  [[ "$("$1/toxiproxy-server" -version)" == "toxiproxy-server version $version" ]] ||
    cp_die "toxiproxy-server does not report $version: $("$1/toxiproxy-server" -version)"
}

main() {
  command -v go >/dev/null || cp_die "go is not installed (hack/setup.sh installs what is needed)"
  cp_go_env
  local dir
  dir="$(cp_toxiproxy_dir)"
  cp_cached_build "$dir" toxiproxy build_toxiproxy
  echo "$dir/toxiproxy-server"
}

main "$@"
