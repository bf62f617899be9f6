#!/usr/bin/env bash
# Stops the local control plane that up.sh started: only the processes whose pids it recorded
# (and that still run the recorded binary), then removes the cluster state. Logs
# stay in <cluster dir>/logs for the post-mortem. Harmless when nothing runs.
#
# Usage: hack/controlplane/down.sh
set -euo pipefail

# shellcheck source=hack/controlplane/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

W="$CP_CLUSTER_DIR"

# Stops the running ones of the named components together: stop_components NAME...
stop_components() {
  local name pid pids=()
  for name in "$@"; do
    if pid="$(cp_live_pid "$name")"; then pids+=("$pid"); fi
  done
  ((${#pids[@]} == 0)) || cp_stop "${pids[@]}"
  stopped=$((stopped + ${#pids[@]}))
}

main() {
  stopped=0
  # NB: clients first, then the API server, then etcd: an API server whose etcd went away first
  # hangs in shutdown.
  stop_components kwok kube-scheduler kube-controller-manager
  stop_components kube-apiserver
  stop_components etcd
  rm -rf "$W/pids" "$W/etcd" "$W/pki" "$W/kubeconfig" "$W/scheduler.yaml"
  cp_log "stopped $stopped process(es); logs kept in $W/logs"
}

main "$@"
