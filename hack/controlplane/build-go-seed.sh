#!/usr/bin/env bash
# Builds the Go seed operator (bench/peers/go-seed), the benchmark peer `make bench-scale` runs
# beside app-operator: the seed's kubebuilder operator with controller-runtime from the Go
# module proxy, versions pinned by its committed go.mod and go.sum.
#
# Like helm (build-helm.sh), the binary is built into a temporary directory and moved atomically
# into $APP_OPERATOR_CACHE/bin/<key> (default ~/.cache/app-operator), where <key> names the
# controller-runtime version and hashes the module's files and the Go version (cp_go_seed_dir);
# a complete entry is reused as is, so a warm run does no Go work. Prints the binary's path on
# stdout.
#
# Usage: hack/controlplane/build-go-seed.sh
set -euo pipefail

# shellcheck source=hack/controlplane/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Builds the operator into OUT: build_go_seed OUT.
build_go_seed() {
  cp_log "building the Go seed operator (controller-runtime" \
    "$(cp_mod_version ../../bench/peers/go-seed sigs.k8s.io/controller-runtime))"
  (cd "$CP_GO_SEED_SRC" && go build -trimpath -ldflags="-s -w" -o "$1/go-seed" .)
  local usage
  usage="$("$1/go-seed" --help 2>&1 || true)"
  [[ "$usage" == *-health-probe-bind-address* ]] ||
    cp_die "the built go-seed does not take --health-probe-bind-address: $usage"
}

main() {
  command -v go >/dev/null || cp_die "go is not installed (hack/setup.sh installs what is needed)"
  cp_go_env
  local dir
  dir="$(cp_go_seed_dir)"
  cp_cached_build "$dir" go-seed build_go_seed
  echo "$dir/go-seed"
}

main "$@"
