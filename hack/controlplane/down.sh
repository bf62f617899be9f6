#!/usr/bin/env bash
# Stops the local control plane that up.sh started: only the processes whose pids it recorded
# (and that still run the recorded binary), newest first, then removes the cluster state. Logs
# stay in <cluster dir>/logs for the post-mortem. Harmless when nothing runs.
#
# Usage: hack/controlplane/down.sh
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

W="$CP_CLUSTER_DIR"

# Sends SIGTERM, waits up to 15 s, then SIGKILL: stop NAME PID
stop() {
  local name="$1" pid="$2" deadline=$((SECONDS + 15))
  kill -TERM "$pid" 2>/dev/null || return 0
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS >= deadline)); then
      cp_log "$name (pid $pid) ignored SIGTERM; killing it"
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.2
  done
}

main() {
  local i name pid stopped=0
  for ((i = ${#CP_COMPONENTS[@]} - 1; i >= 0; i--)); do
    name="${CP_COMPONENTS[i]}"
    if pid="$(cp_live_pid "$name")"; then
      stop "$name" "$pid"
      stopped=$((stopped + 1))
    fi
  done
  rm -rf "$W/pids" "$W/etcd" "$W/pki" "$W/kubeconfig" "$W/scheduler.yaml"
  cp_log "stopped $stopped process(es); logs kept in $W/logs"
}

main "$@"
