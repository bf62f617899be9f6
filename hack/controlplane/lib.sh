# shellcheck shell=bash disable=SC2034 # variables here are used by the scripts that source it
# Shared definitions for the local control plane scripts (sourced, not run).
#
# Defines where the Go-built binaries are cached and where the cluster lives, and computes the
# cache key of the binaries. Safe to source from an interactive shell: it sets no shell options
# and defines only `cp_*` functions and `CP_*` variables.

CP_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CP_CACHE="${APP_OPERATOR_CACHE:-$HOME/.cache/app-operator}"
CP_CLUSTER_DIR="${APP_OPERATOR_CLUSTER_DIR:-$HOME/.cache/app-operator/cluster}"

# Bump when the build recipe (flags, stages file, outputs) changes, so caches are rebuilt.
CP_RECIPE=1

# The Go environment every Go command of the project uses: module and build caches outside the
# repository (CI runs in a fresh clone on the same machine), no toolchain switch, static binaries.
cp_go_env() {
  export GOMODCACHE="$CP_CACHE/gomod"
  export GOCACHE="$CP_CACHE/gobuild"
  export GOTOOLCHAIN=local
  export CGO_ENABLED=0
  export GOFLAGS=-mod=readonly
}

# Prints the version that a wrapper module's go.mod requires for a module: cp_mod_version DIR MOD
cp_mod_version() {
  awk -v m="$2" '($1 == m) { print $2; exit } ($1 == "require" && $2 == m) { print $3; exit }' \
    "$CP_DIR/$1/go.mod"
}

# Prints the name of the binary directory: versions plus a hash of everything that goes into
# the build (wrapper go.mod/go.sum, Go version, recipe version).
cp_bin_key() {
  local k8s etcd kwok sum
  k8s="$(cp_mod_version k8s k8s.io/kubernetes)"
  etcd="$(cp_mod_version etcd go.etcd.io/etcd/server/v3)"
  kwok="$(cp_mod_version kwok sigs.k8s.io/kwok)"
  sum="$(
    {
      echo "recipe=$CP_RECIPE"
      GOTOOLCHAIN=local go env GOVERSION GOOS GOARCH
      cat "$CP_DIR"/k8s/go.mod "$CP_DIR"/k8s/go.sum "$CP_DIR"/etcd/go.mod "$CP_DIR"/etcd/go.sum \
        "$CP_DIR"/kwok/go.mod "$CP_DIR"/kwok/go.sum
    } | sha256sum | cut -c1-12
  )"
  echo "k8s-${k8s}_etcd-${etcd}_kwok-${kwok}_${sum}"
}

# Prints the binary directory for the current wrapper modules (it may not be built yet).
cp_bin_dir() {
  echo "$CP_CACHE/bin/$(cp_bin_key)"
}

# Prints a hash of wrapper module DIR (under hack/controlplane), the Go version and the recipe
# version: the part of a Go tool's cache key that is not its version.
cp_module_hash() {
  {
    echo "recipe=$CP_RECIPE"
    GOTOOLCHAIN=local go env GOVERSION GOOS GOARCH
    cat "$CP_DIR/$1/go.mod" "$CP_DIR/$1/go.sum"
  } | sha256sum | cut -c1-12
}

# Prints helm's cache directory (build-helm.sh): its version plus cp_module_hash of its wrapper
# module. Separate from the control plane's, so either can change alone.
cp_helm_dir() {
  echo "$CP_CACHE/bin/helm-$(cp_mod_version helm helm.sh/helm/v4)_$(cp_module_hash helm)"
}

# Prints the image tools' cache directory (build-imagetools.sh: crane and the CNCF distribution
# registry): their versions plus cp_module_hash of their wrapper module.
cp_imagetools_dir() {
  local crane registry
  crane="$(cp_mod_version imagetools github.com/google/go-containerregistry)"
  registry="$(cp_mod_version imagetools github.com/distribution/distribution/v3)"
  # NB: the wrapper module also holds htpasswd/main.go (hack/registry.sh's secure mode); its
  # source is part of the key.
  local key
  key="$({ cp_module_hash imagetools; cat "$CP_DIR/imagetools/htpasswd/main.go"; } | sha256sum | cut -c1-12)"
  echo "$CP_CACHE/bin/imagetools-crane-${crane}_registry-${registry}_$key"
}

# Prints Toxiproxy's cache directory (build-toxiproxy.sh: the fault proxy the e2e fault tests put
# between the operator and the API server): its version plus cp_module_hash of its wrapper module.
cp_toxiproxy_dir() {
  local version
  version="$(cp_mod_version toxiproxy github.com/Shopify/toxiproxy/v2)"
  echo "$CP_CACHE/bin/toxiproxy-${version}_$(cp_module_hash toxiproxy)"
}

# The Go seed operator (build-go-seed.sh): the seed's kubebuilder operator, a benchmark peer of
# app-operator for `make bench-scale`, a Go module of its own in the repository.
CP_GO_SEED_SRC="${CP_DIR%/hack/controlplane}/bench/peers/go-seed"

# Prints the Go seed operator's cache directory: its controller-runtime version plus a hash of
# the module's files (go.mod, go.sum and every *.go, with their paths), the Go version and the
# recipe version.
cp_go_seed_dir() {
  local cr sum
  cr="$(cp_mod_version ../../bench/peers/go-seed sigs.k8s.io/controller-runtime)"
  sum="$(
    {
      echo "recipe=$CP_RECIPE"
      GOTOOLCHAIN=local go env GOVERSION GOOS GOARCH
      cd "$CP_GO_SEED_SRC" &&
        find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) -print0 |
        LC_ALL=C sort -z | xargs -0 sha256sum
    } | sha256sum | cut -c1-12
  )"
  echo "$CP_CACHE/bin/go-seed-controller-runtime-${cr}_${sum}"
}

# The temporary directory of the build cp_cached_build runs (global: the EXIT trap reads it).
CP_BUILD_TMP=""

# Fills cache entry DIR once: cp_cached_build DIR LOCK_NAME BUILD_FUNCTION. Returns at once when
# DIR is complete; else, holding the lock .build-LOCK_NAME.lock (a second caller waits, then
# finds the finished entry), runs BUILD_FUNCTION with a temporary directory under the cache,
# marks it complete and moves it to DIR, so DIR is never seen half-built.
cp_cached_build() {
  local dir="$1" lock="$2" build="$3" start
  if [[ -f "$dir/.complete" ]]; then
    cp_log "up to date: $dir"
    return
  fi
  mkdir -p "$CP_CACHE/bin"
  exec 9>"$CP_CACHE/bin/.build-$lock.lock"
  flock 9
  [[ -f "$dir/.complete" ]] && return
  start=$SECONDS
  CP_BUILD_TMP="$(mktemp -d "$CP_CACHE/bin/.tmp.XXXXXX")"
  trap 'rm -rf "$CP_BUILD_TMP"' EXIT
  "$build" "$CP_BUILD_TMP"
  touch "$CP_BUILD_TMP/.complete"
  rm -rf "$dir"
  mv -T "$CP_BUILD_TMP" "$dir"
  trap - EXIT
  cp_log "built in $((SECONDS - start)) s: $dir"
}

# The cluster's processes, in start order; `down` stops them in reverse.
CP_COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

# Loopback ports, from one base so that a second cluster can pick another range.
CP_PORT_BASE="${APP_OPERATOR_CLUSTER_PORT_BASE:-16440}"
CP_ETCD_PORT=$((CP_PORT_BASE + 1))
CP_ETCD_PEER_PORT=$((CP_PORT_BASE + 2))
CP_API_PORT=$((CP_PORT_BASE + 3))
CP_KCM_PORT=$((CP_PORT_BASE + 4))
CP_SCHED_PORT=$((CP_PORT_BASE + 5))
CP_KWOK_PORT=$((CP_PORT_BASE + 6))

# Prints the pid recorded for a component if that process is still running the component's
# binary (a recycled pid running something else does not count), else fails.
cp_live_pid() {
  local file="$CP_CLUSTER_DIR/pids/$1.pid" pid
  [[ -f "$file" ]] || return 1
  pid="$(<"$file")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -q "/$1 " || return 1
  echo "$pid"
}

# Succeeds when every component of the recorded cluster runs and the API server is ready.
cp_cluster_running() {
  local c
  for c in "${CP_COMPONENTS[@]}"; do
    cp_live_pid "$c" >/dev/null || return 1
  done
  [[ -f "$CP_CLUSTER_DIR/kubeconfig" && -f "$CP_CLUSTER_DIR/pki/ca.crt" ]] || return 1
  curl -fsS --max-time 5 --cacert "$CP_CLUSTER_DIR/pki/ca.crt" \
    "https://127.0.0.1:$CP_API_PORT/readyz" >/dev/null 2>&1
}

# Succeeds while a process runs. NB: a stopped component is a zombie until init reaps it, which
# here can take seconds; a zombie counts as stopped.
cp_alive() {
  local state
  state="$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" || return 1
  [[ -n "$state" && "$state" != Z ]]
}

# Sends SIGTERM to all, waits up to 15 s for them to exit, then SIGKILLs the rest: cp_stop PID...
cp_stop() {
  local pid deadline=$((SECONDS + 15)) running
  kill -TERM "$@" 2>/dev/null || true
  while :; do
    running=()
    for pid in "$@"; do
      if cp_alive "$pid"; then running+=("$pid"); fi
    done
    ((${#running[@]} == 0)) && return
    if ((SECONDS >= deadline)); then
      cp_log "pid(s) ${running[*]} ignored SIGTERM; killing them"
      kill -KILL "${running[@]}" 2>/dev/null || true
      return
    fi
    sleep 0.1
  done
}

# Stops the running ones of the named components together (recorded pids only), adding their
# number to CP_STOPPED: cp_stop_components NAME...
cp_stop_components() {
  local name pid pids=()
  for name in "$@"; do
    if pid="$(cp_live_pid "$name")"; then pids+=("$pid"); fi
  done
  ((${#pids[@]} == 0)) || cp_stop "${pids[@]}"
  CP_STOPPED=$((${CP_STOPPED:-0} + ${#pids[@]}))
}

# For a script that needs the control plane for one run: uses the running one, else starts one
# and stops it when the calling shell exits (an EXIT trap). Needs KUBECONFIG from env.sh.
cp_up_for_this_run() {
  if cp_cluster_running; then
    cp_log "using the running control plane ($KUBECONFIG)"
  else
    trap '"$CP_DIR/down.sh" || true' EXIT
    "$CP_DIR/up.sh" >/dev/null
  fi
}

# Logging helpers: all messages go to stderr, prefixed with the script name.
cp_log() { echo "[$(basename "$0")] $*" >&2; }
cp_die() {
  echo "[$(basename "$0")] error: $*" >&2
  exit 1
}
