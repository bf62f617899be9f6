#!/usr/bin/env bash
# Starts the local control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler
# and kwok with one fake Node, all on 127.0.0.1, from the binaries that build.sh caches.
#
# Idempotent: when the recorded cluster is running this only prints its kubeconfig. A cluster left
# half-dead by a killed run is stopped (recorded pids only) and replaced by a fresh one. Returns
# once the fake Node is Ready without taints and the `default` ServiceAccount exists, and prints
# the kubeconfig path on stdout.
#
# Work dir: $APP_OPERATOR_CLUSTER_DIR (default ~/.cache/app-operator/cluster), holding
# kubeconfig, pki/, etcd/, logs/ and pids/.
#
# Usage: hack/controlplane/up.sh
# (restart.sh sources this file for its start functions; main runs only when it is executed.)
set -euo pipefail

# shellcheck source=hack/controlplane/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

W="$CP_CLUSTER_DIR"
NODE_NAME="kwok-node-0"

# Makes the CA, one serving + admin client certificate (system:masters) and the service-account
# signing key pair.
make_pki() {
  local p="$W/pki"
  mkdir -p "$p"
  openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 -subj "/CN=app-operator-local-ca" \
    -keyout "$p/ca.key" -out "$p/ca.crt" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    2>/dev/null
  openssl req -newkey rsa:2048 -nodes -sha256 -subj "/O=system:masters/CN=kube-admin" \
    -keyout "$p/admin.key" -out "$p/admin.csr" 2>/dev/null
  cat >"$p/admin.ext" <<'EOF'
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=DNS:localhost,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:10.96.0.1
EOF
  openssl x509 -req -in "$p/admin.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial \
    -days 3650 -sha256 -extfile "$p/admin.ext" -out "$p/admin.crt" 2>/dev/null
  openssl genrsa -out "$p/sa.key" 2048 2>/dev/null
  openssl rsa -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null
}

# Writes the admin kubeconfig (client certificate in group system:masters).
write_kubeconfig() {
  cat >"$W/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: app-operator-local
  cluster:
    server: https://127.0.0.1:$CP_API_PORT
    certificate-authority: $W/pki/ca.crt
users:
- name: admin
  user:
    client-certificate: $W/pki/admin.crt
    client-key: $W/pki/admin.key
contexts:
- name: app-operator-local
  context:
    cluster: app-operator-local
    user: admin
current-context: app-operator-local
EOF
}

# Starts a component in its own session, detached from this script, logging to logs/<name>.log
# and recording its pid in pids/<name>.pid: start NAME ARGS...
start() {
  local name="$1"
  shift
  local pidfile="$W/pids/$name.pid" tries=0
  rm -f "$pidfile"
  # NB: the component records its own pid, just before it execs: $! is not it when setsid forks,
  # which it does when this script runs with job control (every background job then leads its
  # own process group), leaving $! a parent that exits at once. 9>&- so the component does not
  # inherit (and keep holding) the lock of `up`.
  # shellcheck disable=SC2016 # $$, $0 and $@ belong to the inner shell.
  setsid bash -c 'echo "$$" >"$0" && exec "$@"' "$pidfile" "$CP_BIN/$name" "$@" \
    </dev/null >>"$W/logs/$name.log" 2>&1 9>&- &
  # NB: until it execs the component, the recorded pid is a shell whose command line
  # cp_live_pid does not recognise: wait for the exec, so that wait_for does not take a
  # component still starting for one that exited.
  while ! cp_live_pid "$name" >/dev/null && ((tries++ < 200)); do
    sleep 0.05
  done
}

# Waits until a command succeeds, failing early if the component died: wait_for NAME SECONDS CMD...
wait_for() {
  local name="$1" timeout="$2" deadline
  shift 2
  deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if ! cp_live_pid "$name" >/dev/null; then
      tail -n 30 "$W/logs/$name.log" >&2 || true
      cp_die "$name exited; log: $W/logs/$name.log"
    fi
    ((SECONDS < deadline)) || {
      tail -n 30 "$W/logs/$name.log" >&2 || true
      cp_die "$name not ready after ${timeout}s; log: $W/logs/$name.log"
    }
    sleep 0.5
  done
}

# Fails when one of the cluster's ports is already taken by a process we did not start.
check_ports() {
  local port
  for port in "$CP_ETCD_PORT" "$CP_ETCD_PEER_PORT" "$CP_API_PORT" "$CP_KCM_PORT" \
    "$CP_SCHED_PORT" "$CP_KWOK_PORT"; do
    if (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      cp_die "port $port is in use; stop what holds it or set APP_OPERATOR_CLUSTER_PORT_BASE"
    fi
  done
}

start_etcd() {
  start etcd --name=node0 --data-dir="$W/etcd" \
    --listen-client-urls="http://127.0.0.1:$CP_ETCD_PORT" \
    --advertise-client-urls="http://127.0.0.1:$CP_ETCD_PORT" \
    --listen-peer-urls="http://127.0.0.1:$CP_ETCD_PEER_PORT" \
    --initial-advertise-peer-urls="http://127.0.0.1:$CP_ETCD_PEER_PORT" \
    --initial-cluster="node0=http://127.0.0.1:$CP_ETCD_PEER_PORT" \
    --unsafe-no-fsync=true --auto-compaction-retention=1 --log-level=warn
  wait_for etcd 60 curl -fsS "http://127.0.0.1:$CP_ETCD_PORT/readyz"
}

start_apiserver() {
  # NB: kube-apiserver 1.37 refuses a loopback --advertise-address with the default (lease)
  # endpoint reconciler; with `none` it takes it, and nothing depends on the host's network (no
  # default route needed). The `kubernetes` Service then has no endpoints, which nothing here uses.
  start kube-apiserver \
    --advertise-address=127.0.0.1 --endpoint-reconciler-type=none \
    --etcd-servers="http://127.0.0.1:$CP_ETCD_PORT" \
    --bind-address=127.0.0.1 --secure-port="$CP_API_PORT" \
    --tls-cert-file="$W/pki/admin.crt" --tls-private-key-file="$W/pki/admin.key" \
    --client-ca-file="$W/pki/ca.crt" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$W/pki/sa.pub" \
    --service-account-signing-key-file="$W/pki/sa.key" \
    --service-cluster-ip-range=10.96.0.0/16 \
    --authorization-mode=Node,RBAC \
    --service-node-port-range="${APP_OPERATOR_NODE_PORT_RANGE:-30000-32767}" \
    --allow-privileged=true
  wait_for kube-apiserver 120 curl -fsS --cacert "$W/pki/ca.crt" \
    "https://127.0.0.1:$CP_API_PORT/readyz"
}

start_controllers() {
  # NB: client-go's default 20 requests/s made 10,000 Deployments take the Deployment controller
  # over 20 minutes to roll out (the fault suite's scale scenario); this is a local test cluster.
  start kube-controller-manager --kubeconfig="$W/kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$CP_KCM_PORT" --leader-elect=false \
    --kube-api-qps=200 --kube-api-burst=400 \
    --root-ca-file="$W/pki/ca.crt" --service-account-private-key-file="$W/pki/sa.key" \
    --authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics
  cat >"$W/scheduler.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $W/kubeconfig
leaderElection:
  leaderElect: false
EOF
  start kube-scheduler --config="$W/scheduler.yaml" \
    --bind-address=127.0.0.1 --secure-port="$CP_SCHED_PORT" \
    --authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics
  wait_for kube-controller-manager 60 curl -fsSk "https://127.0.0.1:$CP_KCM_PORT/healthz"
  wait_for kube-scheduler 60 curl -fsSk "https://127.0.0.1:$CP_SCHED_PORT/healthz"
}

# Starts kwok and creates the fake node. NB: the node's kubelet endpoint is kwok's own server on
# loopback, so the API server never dials off this machine (logs, exec).
start_kwok() {
  start kwok --kubeconfig="$W/kubeconfig" --config="$CP_BIN/kwok-stages.yaml" \
    --manage-all-nodes=true --node-ip=127.0.0.1 --node-name=localhost \
    --node-port="$CP_KWOK_PORT" --server-address="127.0.0.1:$CP_KWOK_PORT" \
    --node-lease-duration-seconds=40 --cidr=10.244.0.0/16
  kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $NODE_NAME
  annotations:
    node.alpha.kubernetes.io/ttl: "0"
    kwok.x-k8s.io/node: fake
  labels:
    kubernetes.io/hostname: $NODE_NAME
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    type: kwok
EOF
  wait_for kwok 120 kubectl wait --for=condition=Ready "node/$NODE_NAME" --timeout=5s
  wait_for kube-controller-manager 120 node_untainted
  wait_for kube-controller-manager 120 kubectl -n default get serviceaccount default
}

# Succeeds when the fake node carries no taint (the controller manager lifts not-ready ones).
node_untainted() {
  [[ -z "$(kubectl get node "$NODE_NAME" -o 'jsonpath={.spec.taints}')" ]]
}

# EXIT trap of a start: stops what was started when the start failed.
stop_on_failure() {
  if (($1 != 0)); then
    cp_log "start failed; stopping what was started (logs: $W/logs)"
    "$CP_DIR/down.sh" >&2 || true
  fi
}

# Puts the built binaries on PATH (building them if needed) and points kubectl at the cluster.
use_binaries() {
  CP_BIN="$("$CP_DIR/build.sh")"
  export PATH="$CP_BIN:$PATH" KUBECONFIG="$W/kubeconfig"
}

main() {
  local start_time=$SECONDS
  use_binaries
  mkdir -p "$(dirname "$W")"
  # NB: one `up` at a time; a second caller waits, then finds the cluster running.
  exec 9>"$W.lock"
  flock 9
  if cp_cluster_running; then
    cp_log "already running: $W"
    echo "$W/kubeconfig"
    return
  fi
  if [[ -d "$W/pids" ]]; then
    cp_log "replacing a stale cluster in $W"
    "$CP_DIR/down.sh"
  fi
  check_ports
  rm -rf "$W"
  mkdir -p "$W/logs" "$W/pids"
  # A failed start leaves nothing running (logs stay for the post-mortem).
  trap 'stop_on_failure $?' EXIT
  make_pki
  write_kubeconfig
  start_etcd
  start_apiserver
  start_controllers
  start_kwok
  trap - EXIT
  cp_log "up in $((SECONDS - start_time)) s; logs in $W/logs"
  cp_log "export KUBECONFIG=$W/kubeconfig"
  echo "$W/kubeconfig"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  main "$@"
fi
