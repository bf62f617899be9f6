#!/usr/bin/env bash
# The project's test command (`make test`, run by CI): set-up, then format check, clippy and the
# whole test suite against the local control plane. Starts the control plane when none is
# running and stops it at the end, also on failure; a cluster that was already up is left up.
#
# Usage: hack/test.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

log() { echo "[test.sh] $*" >&2; }

# EXIT trap: stops the control plane if this run started it.
stop_cluster() {
  local rc=$?
  if ((rc != 0)); then
    log "failed (exit $rc); control plane logs: ${CP_CLUSTER_DIR:-?}/logs"
  fi
  log "stopping the control plane this run started"
  hack/controlplane/down.sh || true
  exit "$rc"
}

main() {
  export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
  hack/setup.sh
  # The Python and JavaScript example guests, for the conformance suite (host/tests/golden.rs).
  hack/guests/build.sh >/dev/null
  # shellcheck source=hack/controlplane/env.sh
  source hack/controlplane/env.sh
  if cp_cluster_running; then
    log "using the running control plane ($KUBECONFIG)"
  else
    trap stop_cluster EXIT
    hack/controlplane/up.sh >/dev/null
  fi
  cargo fmt --all -- --check
  cargo clippy --workspace --all-targets --release -- -D warnings
  cargo test --workspace --release
}

main "$@"
