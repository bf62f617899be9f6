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
# `start-secure` starts one as a cluster would reach a private registry: HTTPS with a server
# certificate (for 127.0.0.1 and localhost) signed by a CA made for this state directory (openssl),
# and basic auth against an htpasswd file (bcrypt) holding one user with a random password. It
# prints KEY=VALUE lines once /v2/ answers with these credentials: addr (127.0.0.1:PORT), ca (the CA
# certificate, PEM), user and password (files holding each), dockerconfig (a docker config.json
# with these credentials for addr). All of it lives in the state directory; a second start-secure
# on the same directory keeps the CA and the user.
#
# With REGISTRY_PORT set, either starts on that port (one try) rather than a free one: a
# registry stopped and started again keeps its address, as references pinned to it require.
#
# Usage: hack/registry.sh start STATE_DIR
#        hack/registry.sh start-secure STATE_DIR
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
  local state="$1" port="$2" secure="$3"
  {
    cat <<YAML
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
    if [[ "$secure" == 1 ]]; then
      cat <<YAML
  tls:
    certificate: $state/tls/server.pem
    key: $state/tls/server.key
auth:
  htpasswd:
    realm: app-operator-test
    path: $state/htpasswd
YAML
    fi
  } >"$state/config.yml"
}

# Makes, once per state directory $1, the CA, the server certificate it signs and the htpasswd
# user: tls/ca.pem, tls/server.{pem,key}, user, password, htpasswd.
write_secrets() {
  local state="$1" tools="$2"
  mkdir -p "$state/tls"
  if [[ ! -s "$state/tls/server.pem" ]]; then
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=app-operator test CA" \
      -keyout "$state/tls/ca.key" -out "$state/tls/ca.pem" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
      -keyout "$state/tls/server.key" -out "$state/tls/server.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' \
      >"$state/tls/server.ext"
    openssl x509 -req -in "$state/tls/server.csr" -CA "$state/tls/ca.pem" \
      -CAkey "$state/tls/ca.key" -CAcreateserial -days 30 -extfile "$state/tls/server.ext" \
      -out "$state/tls/server.pem" 2>/dev/null
  fi
  if [[ ! -s "$state/htpasswd" ]]; then
    echo "guest-puller" >"$state/user"
    openssl rand -hex 16 | tr -d '\n' >"$state/password"
    "$tools/htpasswd" "$(<"$state/user")" <"$state/password" >"$state/htpasswd"
  fi
  chmod 0600 "$state/password" "$state/tls/ca.key" "$state/tls/server.key"
}

# Writes a docker config.json for the registry at $2 with the state directory $1's user.
write_dockerconfig() {
  local auth
  auth="$(printf '%s:%s' "$(<"$1/user")" "$(<"$1/password")" | base64 -w0)"
  printf '{"auths":{"%s":{"auth":"%s"}}}\n' "$2" "$auth" >"$1/dockerconfig.json"
  chmod 0600 "$1/dockerconfig.json"
}

# Succeeds when the registry on port $2 answers /v2/ (over HTTPS with the credentials of state
# directory $1 when $3 is 1).
answers() {
  if [[ "$3" == 1 ]]; then
    curl -fsS --max-time 2 -o /dev/null --cacert "$1/tls/ca.pem" \
      -u "$(<"$1/user"):$(<"$1/password")" "https://127.0.0.1:$2/v2/" 2>/dev/null
  else
    curl -fsS --max-time 2 -o /dev/null "http://127.0.0.1:$2/v2/" 2>/dev/null
  fi
}

start() {
  local state="$1" secure="$2" tools port pid try
  mkdir -p "$state/storage"
  state="$(cd "$state" && pwd)"
  if pid="$(live_pid "$state")"; then
    die "a registry already runs from $state (pid $pid)"
  fi
  tools="$("$ROOT/hack/controlplane/build-imagetools.sh")"
  [[ "$secure" == 1 ]] && write_secrets "$state" "$tools"
  # NB: a port found free may be taken before the registry binds it; then the registry exits
  # and another port is tried.
  local tries=8
  [[ -n "${REGISTRY_PORT:-}" ]] && tries=1
  for try in $(seq 1 "$tries"); do
    port="${REGISTRY_PORT:-$((20000 + RANDOM % 30000))}"
    if port_in_use "$port"; then
      [[ -n "${REGISTRY_PORT:-}" ]] && die "port $port (REGISTRY_PORT) is in use"
      continue
    fi
    write_config "$state" "$port" "$secure"
    # No trace exporter: the registry would otherwise try to send OpenTelemetry traces.
    OTEL_TRACES_EXPORTER=none setsid "$tools/registry" serve "$state/config.yml" \
      </dev/null >>"$state/registry.log" 2>&1 &
    pid=$!
    echo "$pid" >"$state/pid"
    local _
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      if answers "$state" "$port" "$secure"; then
        echo "127.0.0.1:$port" >"$state/addr"
        log "registry (pid $pid) on 127.0.0.1:$port, storage $state/storage"
        if [[ "$secure" == 1 ]]; then
          write_dockerconfig "$state" "127.0.0.1:$port"
          echo "addr=127.0.0.1:$port"
          echo "ca=$state/tls/ca.pem"
          echo "user=$state/user"
          echo "password=$state/password"
          echo "dockerconfig=$state/dockerconfig.json"
        else
          echo "127.0.0.1:$port"
        fi
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
  (($# == 2)) || die "usage: hack/registry.sh start|start-secure|stop STATE_DIR"
  case "$1" in
    start) start "$2" 0 ;;
    start-secure) start "$2" 1 ;;
    stop) stop "$2" ;;
    *) die "unknown command '$1' (start, start-secure or stop)" ;;
  esac
}

main "$@"
