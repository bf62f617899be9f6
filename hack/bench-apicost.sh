#!/usr/bin/env bash
# What a write costs the API server (`make bench-apicost`): hack/bench-apicost.py on the local
# control plane, with the AppService CRD installed from the operator binary. Starts the control
# plane when none is running and stops what it started at the end.
#
# Usage: hack/bench-apicost.sh [N writes per batch, default 500]
# Env:   SETTLE (seconds after each batch, default 3), ROUNDS (default 2)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

main() {
  hack/setup.sh
  # shellcheck source=hack/controlplane/env.sh
  source hack/controlplane/env.sh
  cp_up_for_this_run
  cargo build --release -q -p app-operator --bin app-operator
  local target="${CARGO_TARGET_DIR:-$ROOT/target}"
  "$target/release/app-operator" crd | kubectl apply --server-side -f - >/dev/null
  python3 hack/bench-apicost.py "$@"
}

main "$@"
