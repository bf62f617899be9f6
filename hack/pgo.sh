#!/usr/bin/env bash
# The shipped operator binary, optimized with a profile of itself at work (profile-guided
# optimization): what `make image` packs and `make bench-scale` measures.
#
# 1. `gen`: builds app-operator with the `dist` profile for TRIPLE, instrumented
#    (`-Cprofile-generate`), into $TARGET_DIR/pgo/gen (a target directory of its own: the
#    instrumented dependencies must not replace the shipped ones).
# 2. `train`: runs that binary as `app-operator run` on the local control plane (started when
#    none runs): COUNT AppServices (default 300) applied at once, until each has a status; then
#    half of them scaled, the other half deleted, until the operator has acted on both; then
#    SIGTERM. The profiles of the operator and of its guest-compile child are merged with the
#    toolchain's llvm-profdata (rustup component llvm-tools, added when missing) into
#    $TARGET_DIR/pgo/TRIPLE.profdata.
# 3. `use`: builds app-operator with the `dist` profile for TRIPLE with that profile
#    (`-Cprofile-use`) into $TARGET_DIR, and prints the binary's path. The linker keeps the
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
# Environment: TRIPLE (default: the host's), COUNT, CARGO_TARGET_DIR, CARGO (default cargo).
# Usage: hack/pgo.sh [gen|train|use|all]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
HOST="$(rustc -vV | awk '/^host:/ { print $2 }')"
TRIPLE="${TRIPLE:-$HOST}"
COUNT="${COUNT:-300}"
CARGO="${CARGO:-cargo}"
PGO_DIR="$TARGET_DIR/pgo"
RAW="$PGO_DIR/raw-$TRIPLE"
PROFDATA="$PGO_DIR/$TRIPLE.profdata"
GEN_BIN="$PGO_DIR/gen/$TRIPLE/dist/app-operator"

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
  log "building the instrumented operator ($TRIPLE, profile dist)"
  rm -rf "$RAW"
  mkdir -p "$RAW"
  RUSTFLAGS="-Cprofile-generate=$RAW" CARGO_TARGET_DIR="$PGO_DIR/gen" \
    "$CARGO" build --locked --profile dist -q -p app-operator --bin app-operator \
    --target "$TRIPLE"
}

# Prints "observed/all": how many AppServices in namespace $1 have a status.observedGeneration
# equal to their generation, and how many there are.
observed() {
  kubectl get appservices -n "$1" -o json |
    jq -r '.items | "\([.[] | select(.status.observedGeneration == .metadata.generation)] | length)/\(length)"'
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
    printf -- '---\napiVersion: apps.kudevops.io/v1alpha1\nkind: AppService\nmetadata:\n  name: app-%05d\nspec:\n  replicas: 1\n  image: nginx:alpine\n  ports:\n  - port: 80\n' "$i"
  done >"$work/apps.yaml"
  rm -rf "$RAW"/*.profraw
  log "training: $COUNT AppServices in namespace $ns"
  LLVM_PROFILE_FILE="$RAW/app-operator-%p-%m.profraw" RUST_LOG=warn "$GEN_BIN" run \
    --namespace "$ns" --guest-configmap pgo-guest --guest-configmap-namespace "$ns" \
    --metrics-addr 127.0.0.1:18380 --probe-addr 127.0.0.1:18381 >"$work/operator.log" 2>&1 &
  local op=$!
  until curl -sf 127.0.0.1:18381/readyz >/dev/null; do
    kill -0 "$op" 2>/dev/null || die "the operator exited: $(tail -5 "$work/operator.log")"
    sleep 0.2
  done
  kubectl apply --server-side -n "$ns" -f "$work/apps.yaml" >/dev/null
  wait_for "every status" "observed $ns" "$COUNT/$COUNT"
  local half=$((COUNT / 2))
  for ((i = 0; i < half; i++)); do
    printf 'app-%05d\n' "$i"
  done | xargs -P 4 -n 50 kubectl scale appservice -n "$ns" --replicas 2 >/dev/null
  for ((i = half; i < COUNT; i++)); do
    printf 'appservice/app-%05d\n' "$i"
  done | xargs -n 100 kubectl delete -n "$ns" --wait=false >/dev/null
  wait_for "the scaled statuses" "observed $ns" "$half/$half"
  kill -TERM "$op"
  wait "$op" || die "the operator did not stop cleanly: $(tail -5 "$work/operator.log")"
  kubectl delete namespace "$ns" --wait=false >/dev/null
  rm -rf "$work"
  "$(profdata_tool)" merge -o "$PROFDATA" "$RAW"/*.profraw
  log "profile: $PROFDATA ($(find "$RAW" -name '*.profraw' | wc -l) raw profiles)"
}

use() {
  [[ -s "$PROFDATA" ]] || die "$PROFDATA is missing: run \`hack/pgo.sh gen train\` first"
  # NB: the profile is passed under a name of its content, so that a new profile changes
  # RUSTFLAGS and cargo rebuilds every crate with it, not only those whose source changed.
  local by_content
  by_content="$PGO_DIR/$TRIPLE-$(sha256sum "$PROFDATA" | cut -c1-16).profdata"
  if [[ ! -e "$by_content" ]]; then
    rm -f "$PGO_DIR/$TRIPLE"-*.profdata
    cp "$PROFDATA" "$by_content"
  fi
  log "building the operator with its profile ($TRIPLE, profile dist)"
  RUSTFLAGS="-Cprofile-use=$by_content" \
    "$CARGO" build --locked --profile dist -q -p app-operator --bin app-operator \
    --target "$TRIPLE"
  echo "$TARGET_DIR/$TRIPLE/dist/app-operator" >&3
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
