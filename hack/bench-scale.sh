#!/usr/bin/env bash
# Scale benchmark (`make bench-scale`): COUNT AppServices (default 1000) created at once on the
# local control plane. First ROUNDS rounds (default 3) side by side with the Go seed operator
# (bench/peers/go-seed, built by hack/controlplane/build-go-seed.sh): time to children, to
# statuses, CPU, peak RSS and API requests of each, and the ratios, beside the cluster's limit
# (the benchmark writing each AppService's children and status itself). Then, on app-operator only:
# convergence times, reconcile p50/p99, the operator's API requests and peak RSS, the API
# server's own apply rate for the same objects with no operator (for the ratio), and two guest
# swaps. Starts the control plane when none is running and stops what it started at the end.
#
# Usage: hack/bench-scale.sh [bench-scale flags, e.g. --count 200 --rounds 2 --rounds-only]
# Env:   COUNT, REPLICAS (default 1), CONCURRENCY (default 16), ROUNDS (default 3), TRIPLE (the
#        target both Rust contenders are built for: default x86_64-unknown-linux-musl, the
#        image's; x86_64-unknown-linux-gnu for the glibc binary `make run` builds)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

log() { echo "[bench-scale.sh] $*" >&2; }

main() {
  hack/setup.sh
  # shellcheck source=hack/controlplane/env.sh
  source hack/controlplane/env.sh
  cp_up_for_this_run
  log "building the operator, the Go seed operator and the benchmark"
  local go_seed
  go_seed="$(hack/controlplane/build-go-seed.sh)"
  # NB: the operator built as shipped (hack/pgo.sh: profile dist, whole-program LTO, optimized
  # with a profile of its own run; about an hour cold), for the image's target by default (the
  # static musl binary `make image` packs, from the same build), the kube-rs floor the same way
  # (its own profile, of its own run), the driver itself in release.
  local triple="${TRIPLE:-x86_64-unknown-linux-musl}" operator floor
  operator="$(TRIPLE="$triple" hack/pgo.sh)"
  floor="$(TRIPLE="$triple" PGO_BIN=kube-rs-floor hack/pgo.sh)"
  cargo build --release -q -p app-operator-bench-scale --bin bench-scale
  local target="${CARGO_TARGET_DIR:-$ROOT/target}"
  mkdir -p .work
  cd .work
  OPERATOR_BIN="$operator" GO_SEED_BIN="$go_seed" FLOOR_BIN="$floor" \
    "$target/release/bench-scale" "$@"
}

main "$@"
