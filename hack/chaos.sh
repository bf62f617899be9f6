#!/usr/bin/env bash
# The long fault scenarios (`make chaos`, e2e/tests/chaos.rs): the real API server restarted
# alone and with the whole control plane, etcd compacted under the operator's watches, the leader
# of two replicas cut off past its Lease, and 10,000 AppServices at once. They restart the local
# control plane's API server and compact its etcd, so run them alone, not beside `make test` on
# the same control plane (APP_OPERATOR_CLUSTER_DIR and APP_OPERATOR_CLUSTER_PORT_BASE select
# another one). Starts the control plane when none is running and stops it at the end.
#
# Ends with the summary line of every scenario. Extra arguments go to the test binary, e.g. a
# scenario's name: hack/chaos.sh api_server_restart
#
# Usage: hack/chaos.sh [test filter]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

main() {
  hack/setup.sh
  # shellcheck source=hack/controlplane/env.sh
  source hack/controlplane/env.sh
  cp_up_for_this_run
  mkdir -p .work
  local out=.work/chaos.log rc=0
  # NB: the scenarios run the operator's binary, which `cargo test -p app-operator-e2e` does not
  # build.
  cargo build --release -q -p app-operator
  cargo test --release -p app-operator-e2e --test chaos -- --ignored --test-threads=1 \
    --nocapture "$@" 2>&1 | tee "$out" || rc=$?
  echo
  echo "== make chaos: one line per scenario (load: $(cut -d' ' -f1-3 /proc/loadavg)) =="
  grep -E '^fault ' "$out" || true
  grep -E '^test result' "$out" || true
  return "$rc"
}

main "$@"
