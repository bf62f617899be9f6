#!/usr/bin/env bash
# Restarts part or all of the running local control plane with its state (etcd data, PKI,
# kubeconfig) and flags kept, for the fault scenarios (`make chaos`): stops the components,
# waits SECS with them down, starts them again and returns once the API server is ready (and,
# for `all`, the fake Node too).
#
#   apiserver  kube-apiserver alone (etcd and the rest keep running)
#   all        every component, etcd included, stopped clients first and started etcd first
#
# Usage: hack/controlplane/restart.sh apiserver|all [SECS]   (SECS: down time, default 0)
set -euo pipefail

# shellcheck source=hack/controlplane/up.sh
source "$(dirname "${BASH_SOURCE[0]}")/up.sh"

restart_main() {
  local what="${1:-}" down="${2:-0}" t0
  [[ "$what" == apiserver || "$what" == all ]] ||
    cp_die "usage: $0 apiserver|all [SECS]"
  cp_cluster_running || cp_die "no running control plane in $W (start it with up.sh)"
  use_binaries
  exec 9>"$W.lock"
  flock 9
  t0=$SECONDS
  case "$what" in
    apiserver)
      cp_stop_components kube-apiserver
      cp_log "kube-apiserver stopped; down for ${down}s"
      sleep "$down"
      start_apiserver
      ;;
    all)
      cp_stop_components kwok kube-scheduler kube-controller-manager
      cp_stop_components kube-apiserver
      cp_stop_components etcd
      cp_log "control plane stopped; down for ${down}s"
      sleep "$down"
      start_etcd
      start_apiserver
      start_controllers
      start_kwok
      ;;
  esac
  cp_log "$what back after $((SECONDS - t0)) s"
}

restart_main "$@"
