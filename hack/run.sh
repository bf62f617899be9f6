#!/usr/bin/env bash
# The README's run command (`make run`): on a fresh machine, sets up, starts the local control
# plane, installs the CRD, builds and runs the operator, applies the sample AppService and shows
# `kubectl get appservice,deployment,service` once the sample is 3/3 ready.
#
# The operator then keeps running in the foreground (its log: .work/operator.log) until Ctrl-C;
# with --once the sample is deleted and the operator stopped right after the table (the sample's
# nodePort 30080 is cluster-wide, and the e2e tests need it). The control plane stays up either
# way (`make cluster-down` stops it).
#
# Usage: hack/run.sh [--once]
# Env:   APP_OPERATOR_METRICS_ADDR (default 127.0.0.1:8080), APP_OPERATOR_PROBE_ADDR
#        (default 127.0.0.1:8081), RUST_LOG, and every other `app-operator run` variable.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

log() { echo "[run.sh] $*" >&2; }
die() {
  echo "[run.sh] error: $*" >&2
  exit 1
}

ONCE=false
case "${1:-}" in
  --once) ONCE=true ;;
  "") ;;
  *) die "usage: hack/run.sh [--once]" ;;
esac

export APP_OPERATOR_METRICS_ADDR="${APP_OPERATOR_METRICS_ADDR:-127.0.0.1:8080}"
export APP_OPERATOR_PROBE_ADDR="${APP_OPERATOR_PROBE_ADDR:-127.0.0.1:8081}"
SAMPLE=config/samples/apps_v1alpha1_appservice.yaml
WORK="$ROOT/.work"
OPERATOR_LOG="$WORK/operator.log"
OPERATOR_PID=""

stop_operator() {
  if [[ -n "$OPERATOR_PID" ]] && kill -0 "$OPERATOR_PID" 2>/dev/null; then
    log "stopping the operator (pid $OPERATOR_PID)"
    kill -TERM "$OPERATOR_PID" 2>/dev/null || true
    wait "$OPERATOR_PID" 2>/dev/null || true
  fi
}

# Waits up to $1 seconds for the operator's /readyz.
wait_operator_ready() {
  local deadline=$((SECONDS + $1))
  until curl -fsS "http://$APP_OPERATOR_PROBE_ADDR/readyz" >/dev/null 2>&1; do
    kill -0 "$OPERATOR_PID" 2>/dev/null || die "the operator exited; its log: $OPERATOR_LOG"
    ((SECONDS < deadline)) || die "the operator is not ready after $1 s; its log: $OPERATOR_LOG"
    sleep 0.5
  done
}

main() {
  hack/setup.sh
  # shellcheck source=controlplane/env.sh
  source hack/controlplane/env.sh
  hack/controlplane/up.sh >/dev/null

  log "building the operator"
  cargo build --release -q -p app-operator
  local bin="${CARGO_TARGET_DIR:-$ROOT/target}/release/app-operator"

  log "installing the AppService CRD"
  "$bin" crd | kubectl apply --server-side --force-conflicts -f - >/dev/null
  kubectl wait --for condition=Established --timeout=60s crd/appservices.apps.kudevops.io >/dev/null

  mkdir -p "$WORK"
  log "starting the operator (log: $OPERATOR_LOG)"
  "$bin" run >"$OPERATOR_LOG" 2>&1 &
  OPERATOR_PID=$!
  trap stop_operator EXIT
  trap 'exit 130' INT TERM
  wait_operator_ready 60

  log "applying $SAMPLE"
  kubectl apply -f "$SAMPLE" >/dev/null
  kubectl wait appservice/nginx --for=jsonpath='{.status.ready}'=3/3 --timeout=120s >/dev/null
  kubectl wait appservice/nginx --for=condition=Ready --timeout=60s >/dev/null
  kubectl get appservice,deployment,service -o wide

  if $ONCE; then
    kubectl delete -f "$SAMPLE" --wait=true >/dev/null
    return
  fi
  log "the operator keeps running; Ctrl-C stops it (the control plane stays up: make cluster-down)"
  tail -n +1 -f "$OPERATOR_LOG" --pid="$OPERATOR_PID"
}

main "$@"
