#!/usr/bin/env bash
# The shipped operator binary, optimized with a profile of itself at work (profile-guided
# optimization): what `make image` packs and `make bench-scale` measures. With
# PGO_BIN=kube-rs-floor, the same for the benchmark's kube-rs floor (bench/scale), so that the
# floor is built as the operator it is the floor of.
#
# 1. `gen`: builds PGO_BIN with the `dist` profile for TRIPLE, instrumented
#    (`-Cprofile-generate`), into $TARGET_DIR/pgo/gen (a target directory of its own: the
#    instrumented dependencies must not replace the shipped ones).
# 2. `train`: runs that binary on the local control plane (started when none runs), in a
#    namespace of its own. app-operator: `app-operator run`, COUNT AppServices (default 300)
#    applied at once, until each has a status; then half of them scaled, the other half deleted,
#    until the operator has acted on both. The floor: COUNT AppServices, until each has its
#    Deployment and Service (all it does). Then SIGTERM. The binary's profiles (app-operator's
#    with its guest-compile child's) are merged with the toolchain's llvm-profdata (rustup
#    component llvm-tools, added when missing) into $TARGET_DIR/pgo/PGO_BIN-TRIPLE.profdata.
# 3. `use`: builds PGO_BIN with the `dist` profile for TRIPLE with that profile
#    (`-Cprofile-use`) and prints the binary's path: app-operator into $TARGET_DIR, the floor into
#    $TARGET_DIR/pgo/use-kube-rs-floor (its RUSTFLAGS differ from the operator's, so in one
#    directory each build would rebuild the other's dependencies). The linker keeps the
#    compiler's hot and unlikely functions in sections of their own (host/build.rs), so the code
#    the operator runs lies on fewer pages.
# `all` (the default) runs the three in turn, and skips `train` when the profile is newer than
# the instrumented binary (nothing was rebuilt since it was made). Only the binary's path goes to
# stdout; everything else to stderr.
#
# The names in a profile are the compiled symbols: the instrumented and the optimized build must
# be of the same source, profile, target and directory. A stale profile is not an error: the
# functions that changed are optimized without it.
#
# Environment: PGO_BIN (app-operator, the default, or kube-rs-floor), TRIPLE (default: the
# host's), COUNT, CARGO_TARGET_DIR, CARGO (default cargo).
# Usage: hack/pgo.sh [gen|train|use|all]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
HOST="$(rustc -vV | awk '/^host:/ { print $2 }')"
TRIPLE="${TRIPLE:-$HOST}"
COUNT="${COUNT:-300}"
CARGO="${CARGO:-cargo}"
BIN="${PGO_BIN:-app-operator}"
case "$BIN" in
  app-operator) PACKAGE=app-operator USE_DIR="$TARGET_DIR" ;;
  kube-rs-floor) PACKAGE=app-operator-bench-scale USE_DIR="$TARGET_DIR/pgo/use-$BIN" ;;
  *) echo "[pgo.sh] PGO_BIN is app-operator or kube-rs-floor, not $BIN" >&2 && exit 1 ;;
esac
PGO_DIR="$TARGET_DIR/pgo"
# NB: one directory of raw profiles for both binaries, each file named after its program, so that
# both instrumented builds have the same RUSTFLAGS and share their dependencies.
RAW="$PGO_DIR/raw-$TRIPLE"
PROFDATA="$PGO_DIR/$BIN-$TRIPLE.profdata"
GEN_BIN="$PGO_DIR/gen/$TRIPLE/dist/$BIN"

# shellcheck source=hack/controlplane/lib.sh
source hack/controlplane/lib.sh
log() { cp_log "$@"; }
die() { cp_die "$@"; }

# Path of the toolchain's llvm-profdata (the same LLVM as rustc's), from rustup's llvm-tools
# component, added when missing.
profdata_tool() {
  local tool
  tool="$(rustc --print sysroot)/lib/rustlib/$HOST/bin/llvm-profdata"
  if [[ ! -x "$tool" ]]; then
    log "adding the llvm-tools Rust component (llvm-profdata)"
    rustup component add llvm-tools >&2
  fi
  [[ -x "$tool" ]] || die "llvm-profdata is missing: rustup component add llvm-tools"
  echo "$tool"
}

gen() {
  log "building the instrumented $BIN ($TRIPLE, profile dist)"
  mkdir -p "$RAW"
  RUSTFLAGS="-Cprofile-generate=$RAW" CARGO_TARGET_DIR="$PGO_DIR/gen" \
    "$CARGO" build --locked --profile dist -q -p "$PACKAGE" --bin "$BIN" --target "$TRIPLE"
}

# Prints "observed/all": how many AppServices in namespace $1 have a status.observedGeneration
# equal to their generation, and how many there are.
observed() {
  kubectl get appservices -n "$1" -o json |
    jq -r '.items | "\([.[] | select(.status.observedGeneration == .metadata.generation)] | length)/\(length)"'
}

# Prints "deployments/services": how many of each there are in namespace $1.
children() {
  echo "$(kubectl get deployments -n "$1" -o name | wc -l)/$(kubectl get services -n "$1" -o name | wc -l)"
}

# Waits until `$2` returns $3 (checks every second; gives up after 600 s).
wait_for() {
  local what="$1" cmd="$2" want="$3" i
  for ((i = 0; i < 600; i++)); do
    [[ "$($cmd)" == "$want" ]] && return 0
    sleep 1
  done
  die "timed out waiting for $what"
}

# The training load of app-operator in namespace $1 (the operator runs): every status, then half
# of the AppServices scaled and half deleted.
train_operator() {
  local ns="$1" half=$((COUNT / 2))
  wait_for "every status" "observed $ns" "$COUNT/$COUNT"
  for ((i = 0; i < half; i++)); do
    printf 'app-%05d\n' "$i"
  done | xargs -P 4 -n 50 kubectl scale appservice -n "$ns" --replicas 2 >/dev/null
  for ((i = half; i < COUNT; i++)); do
    printf 'appservice/app-%05d\n' "$i"
  done | xargs -n 100 kubectl delete -n "$ns" --wait=false >/dev/null
  wait_for "the scaled statuses" "observed $ns" "$half/$half"
}

# The training load of the kube-rs floor in namespace $1: every AppService's children.
train_floor() {
  wait_for "every child" "children $1" "$COUNT/$COUNT"
}

train() {
  [[ -x "$GEN_BIN" ]] || die "$GEN_BIN is missing: run \`hack/pgo.sh gen\` first"
  # shellcheck source=hack/controlplane/env.sh
  source hack/controlplane/env.sh
  cp_up_for_this_run
  local ns="pgo-$$" work
  work="$(mktemp -d)"
  kubectl apply --server-side -f config/crd/apps.kudevops.io_appservices.yaml >/dev/null
  kubectl create namespace "$ns" >/dev/null
  for ((i = 0; i < COUNT; i++)); do
    printf -- '---\napiVersion: apps.kudevops.io/v1alpha1\nkind: AppService\nmetadata:\n  name: app-%05d\nspec:\n  replicas: 1\n  image: nginx:alpine\n  ports:\n  - port: 80\n    targetPort: 8080\n' "$i"
  done >"$work/apps.yaml"
  rm -f "$RAW/$BIN"-*.profraw
  log "training $BIN: $COUNT AppServices in namespace $ns"
  # NB: the floor takes only these flags; app-operator runs as `run`, with a guest ConfigMap.
  local addrs=(--metrics-addr 127.0.0.1:18380 --probe-addr 127.0.0.1:18381)
  local run=() load=train_floor
  if [[ "$BIN" == app-operator ]]; then
    run=(run --guest-configmap pgo-guest --guest-configmap-namespace "$ns")
    load=train_operator
  fi
  LLVM_PROFILE_FILE="$RAW/$BIN-%p-%m.profraw" RUST_LOG=warn "$GEN_BIN" "${run[@]}" \
    --namespace "$ns" "${addrs[@]}" >"$work/operator.log" 2>&1 &
  local op=$!
  until curl -sf 127.0.0.1:18381/readyz >/dev/null; do
    kill -0 "$op" 2>/dev/null || die "$BIN exited: $(tail -5 "$work/operator.log")"
    sleep 0.2
  done
  kubectl apply --server-side -n "$ns" -f "$work/apps.yaml" >/dev/null
  "$load" "$ns"
  kill -TERM "$op"
  wait "$op" || die "$BIN did not stop cleanly: $(tail -5 "$work/operator.log")"
  kubectl delete namespace "$ns" --wait=false >/dev/null
  rm -rf "$work"
  "$(profdata_tool)" merge -o "$PROFDATA" "$RAW/$BIN"-*.profraw
  log "profile: $PROFDATA ($(find "$RAW" -name "$BIN-*.profraw" | wc -l) raw profiles)"
}

use() {
  [[ -s "$PROFDATA" ]] || die "$PROFDATA is missing: run \`hack/pgo.sh gen train\` first"
  # NB: the profile is passed under a name of its content, so that a new profile changes
  # RUSTFLAGS and cargo rebuilds every crate with it, not only those whose source changed.
  local by_content
  by_content="$PGO_DIR/$BIN-$TRIPLE-$(sha256sum "$PROFDATA" | cut -c1-16).profdata"
  if [[ ! -e "$by_content" ]]; then
    rm -f "$PGO_DIR/$BIN-$TRIPLE"-*.profdata
    cp "$PROFDATA" "$by_content"
  fi
  log "building $BIN with its profile ($TRIPLE, profile dist)"
  RUSTFLAGS="-Cprofile-use=$by_content" CARGO_TARGET_DIR="$USE_DIR" \
    "$CARGO" build --locked --profile dist -q -p "$PACKAGE" --bin "$BIN" --target "$TRIPLE"
  echo "$USE_DIR/$TRIPLE/dist/$BIN" >&3
}

main() {
  local steps=("$@")
  [[ ${#steps[@]} -gt 0 ]] || steps=(all)
  # NB: fd 3 is the caller's stdout, for the binary's path; the rest (cargo, kubectl, the control
  # plane's EXIT trap) writes to stderr.
  exec 3>&1 1>&2
  for step in "${steps[@]}"; do
    case "$step" in
      gen | train | use) "$step" ;;
      all)
        gen
        if [[ "$PROFDATA" -nt "$GEN_BIN" ]]; then
          log "the profile is newer than the instrumented binary: not training again"
        else
          train
        fi
        use
        ;;
      *) die "unknown step $step (gen, train, use or all)" ;;
    esac
  done
}

main "$@"
