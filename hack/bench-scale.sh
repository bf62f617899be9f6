#!/usr/bin/env bash
# Scale benchmark (`make bench-scale`): COUNT AppServices (default 1000) created at once on the
# local control plane and reconciled by the operator binary; prints convergence times, reconcile
# p50/p99, the operator's API requests and peak RSS, and the API server's own apply rate for the
# same objects with no operator (for the ratio). Starts the control plane when none is running
# and stops what it started at the end.
#
# Usage: hack/bench-scale.sh [bench-scale flags, e.g. --count 200 --skip-baseline]
# Env:   COUNT, REPLICAS (default 1), CONCURRENCY (default 16)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

log() { echo "[bench-scale.sh] $*" >&2; }

main() {
  hack/setup.sh
  # shellcheck source=hack/controlplane/env.sh
  source hack/controlplane/env.sh
  if cp_cluster_running; then
    log "using the running control plane ($KUBECONFIG)"
  else
    trap '"$ROOT/hack/controlplane/down.sh" || true' EXIT
    hack/controlplane/up.sh >/dev/null
  fi
  log "building the operator and the benchmark"
  cargo build --release -q -p app-operator -p app-operator-e2e --bins
  local target="${CARGO_TARGET_DIR:-$ROOT/target}/release"
  mkdir -p .work
  cd .work
  OPERATOR_BIN="$target/app-operator" "$target/bench-scale" "$@"
}

main "$@"
