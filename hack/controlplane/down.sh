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

main() {
  CP_STOPPED=0
  # NB: clients first, then the API server, then etcd: an API server whose etcd went away first
  # hangs in shutdown.
  cp_stop_components kwok kube-scheduler kube-controller-manager
  cp_stop_components kube-apiserver
  cp_stop_components etcd
  rm -rf "$W/pids" "$W/etcd" "$W/pki" "$W/kubeconfig" "$W/scheduler.yaml"
  cp_log "stopped $CP_STOPPED process(es); logs kept in $W/logs"
}

main "$@"
