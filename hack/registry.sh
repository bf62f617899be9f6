#!/usr/bin/env bash
# Starts and stops a local OCI registry (the CNCF distribution registry, built from Go modules by
# hack/controlplane/build-imagetools.sh and cached), for the engine-free image build and its round
# trip test. Each registry lives in a state directory of its own: its config, its storage (under
# the state directory, so deleting it deletes every blob), its log, pid and address. It listens on
# plain HTTP on a free 127.0.0.1 port: crane talks HTTP to localhost registries on its own.
#
# `start` prints the registry's address (127.0.0.1:PORT) on stdout once /v2/ answers; `stop` ends
# the process recorded in the state directory (only that one) and leaves the directory.
#
# Usage: hack/registry.sh start STATE_DIR
#        hack/registry.sh stop STATE_DIR
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

log() { echo "[registry.sh] $*" >&2; }
die() {
  echo "[registry.sh] error: $*" >&2
  exit 1
}

# Succeeds when something listens on 127.0.0.1:$1.
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Prints the pid recorded in state directory $1 if that process is still a registry, else fails.
live_pid() {
  local pid
  [[ -f "$1/pid" ]] || return 1
  pid="$(<"$1/pid")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -q "/registry serve " || return 1
  echo "$pid"
}

write_config() {
  local state="$1" port="$2"
  cat >"$state/config.yml" <<YAML
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $state/storage
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
  # Signs upload state; loopback only, one instance, so a fixed one does.
  secret: app-operator-local-registry
YAML
}

start() {
  local state="$1" tools port pid try
  mkdir -p "$state/storage"
  state="$(cd "$state" && pwd)"
  if pid="$(live_pid "$state")"; then
    die "a registry already runs from $state (pid $pid)"
  fi
  tools="$("$ROOT/hack/controlplane/build-imagetools.sh")"
  # NB: a port found free may be taken before the registry binds it; then the registry exits
  # and another port is tried.
  for try in 1 2 3 4 5 6 7 8; do
    port=$((20000 + RANDOM % 30000))
    port_in_use "$port" && continue
    write_config "$state" "$port"
    # No trace exporter: the registry would otherwise try to send OpenTelemetry traces.
    OTEL_TRACES_EXPORTER=none setsid "$tools/registry" serve "$state/config.yml" \
      </dev/null >>"$state/registry.log" 2>&1 &
    pid=$!
    echo "$pid" >"$state/pid"
    local _
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      if curl -fsS --max-time 2 -o /dev/null "http://127.0.0.1:$port/v2/" 2>/dev/null; then
        echo "127.0.0.1:$port" >"$state/addr"
        log "registry (pid $pid) on 127.0.0.1:$port, storage $state/storage"
        echo "127.0.0.1:$port"
        return
      fi
      sleep 0.1
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    rm -f "$state/pid"
    log "attempt $try: no registry on port $port; log: $(tail -n 3 "$state/registry.log")"
  done
  die "could not start a registry; see $state/registry.log"
}

stop() {
  local state="$1" pid _
  if ! pid="$(live_pid "$state")"; then
    rm -f "$state/pid" "$state/addr"
    return
  fi
  kill "$pid"
  for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  rm -f "$state/pid" "$state/addr"
  log "stopped the registry (pid $pid)"
}

main() {
  (($# == 2)) || die "usage: hack/registry.sh start|stop STATE_DIR"
  case "$1" in
    start) start "$2" ;;
    stop) stop "$2" ;;
    *) die "unknown command '$1' (start or stop)" ;;
  esac
}

main "$@"
