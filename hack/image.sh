#!/usr/bin/env bash
# `make image` / `make image-push`: the operator's OCI image without a container engine.
#
# `build` compiles the static (musl) binary as hack/pgo.sh builds it (profile dist, optimized
# with a profile of its own run on the local control plane), strips its debug info, precompiles
# the default guest with it (`guest precompile`: /guests/<digest>-<engine hash>.cwasm, which
# `run` loads instead of compiling the guest at start, on any node of x86-64-v3 or above; see
# docs/operations.md), packs both into a layer tarball (owned by root, the binary mode 0755, the
# artifact 0644, fixed mtime) and turns that into an image FROM scratch with crane (built from Go modules and cached by
# hack/controlplane/build-imagetools.sh): `crane append --oci-empty-base`, then `crane mutate`
# for the entrypoint, command, non-root user 65532:65532, APP_OPERATOR_GUEST_PRECOMPILED_DIR,
# exposed ports, platform and OCI labels.
# crane edits images in a registry, so a throwaway local registry (hack/registry.sh) holds the
# intermediate images; the result is pulled into an OCI image layout at $OUT, the only output.
# The image has no shell, no /etc/passwd and no CA bundle: the operator needs none (the API
# server's CA comes from the service account). It matches the Dockerfile's image (same binary
# path, precompiled guest, user, entrypoint and ports) without its distroless base.
#
# `push` pushes the layout at $OUT to $IMG (crane's credentials: ~/.docker/config.json, or
# `crane auth login`).
#
# Environment: IMG (the reference `push` pushes to, and the name in the logs; default
# app-operator:0.1.0), OUT (default $CARGO_TARGET_DIR/image/oci, else target/image/oci), CARGO
# (default cargo).
#
# Usage: IMG=registry.example/app-operator:v9 hack/image.sh build|push
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
IMG="${IMG:-app-operator:0.1.0}"
OUT="${OUT:-$TARGET_DIR/image/oci}"
CARGO="${CARGO:-cargo}"
TRIPLE=x86_64-unknown-linux-musl
# The image's user: distroless's `nonroot`, the same numbers config/manager's securityContext runs as.
USER_ID=65532:65532
# Where the image holds the precompiled default guest (read-only, root's).
GUESTS=guests

log() { echo "[image.sh] $*" >&2; }
die() {
  echo "[image.sh] error: $*" >&2
  exit 1
}

# Prints the path of the freshly built, static release binary.
build_binary() {
  rustup target list --installed | grep -qx "$TRIPLE" ||
    die "the $TRIPLE Rust target is missing (hack/setup.sh adds it)"
  command -v musl-gcc >/dev/null || die "musl-gcc is missing (hack/setup.sh installs musl-tools)"
  log "building the static binary ($TRIPLE, profile dist: LTO and profile-guided, about an hour cold)"
  local bin
  bin="$(TRIPLE="$TRIPLE" CARGO="$CARGO" "$ROOT/hack/pgo.sh")"
  # NB: a dynamic binary would need a loader the image does not have.
  if readelf -l "$bin" | grep -q 'Requesting program interpreter'; then
    die "$bin is not static"
  fi
  echo "$bin"
}

build() {
  local bin tools addr version revision ref
  bin="$(build_binary)"
  tools="$("$ROOT/hack/controlplane/build-imagetools.sh")"
  WORK="$(mktemp -d)"
  trap 'stop_registry "$WORK"; rm -rf "$WORK"' EXIT
  local work="$WORK"

  mkdir -p "$work/rootfs"
  # Debug info off (the release profile keeps line tables, most of the binary); symbols stay.
  strip --strip-debug -o "$work/rootfs/app-operator" "$bin"
  chmod 0755 "$work/rootfs/app-operator"
  version="$("$work/rootfs/app-operator" --version | awk '{ print $2 }')"
  # NB: run's default engine flags; a deployment that sets --guest-fuel compiles at start.
  "$work/rootfs/app-operator" guest precompile --out-dir "$work/rootfs/$GUESTS" >&2
  chmod 0755 "$work/rootfs/$GUESTS"
  chmod 0644 "$work/rootfs/$GUESTS"/*
  revision="$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)"
  tar --create --file "$work/layer.tar" --directory "$work/rootfs" --sort=name \
    --owner=0 --group=0 --numeric-owner --mtime=@0 --format=posix \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime app-operator "$GUESTS"

  addr="$("$ROOT/hack/registry.sh" start "$work/registry")"
  ref="$addr/app-operator:build"
  "$tools/crane" append --oci-empty-base -f "$work/layer.tar" -t "$ref.base" >/dev/null
  "$tools/crane" mutate "$ref.base" -t "$ref" \
    --entrypoint=/app-operator --cmd=run --user="$USER_ID" --workdir=/ \
    --env="APP_OPERATOR_GUEST_PRECOMPILED_DIR=/$GUESTS" \
    --exposed-ports=8080/tcp,8081/tcp --set-platform=linux/amd64 \
    -l org.opencontainers.image.title=app-operator \
    -l "org.opencontainers.image.description=$(sed -n 's/^description = "\(.*\)"$/\1/p' "$ROOT/host/Cargo.toml")" \
    -l "org.opencontainers.image.version=$version" \
    -l "org.opencontainers.image.revision=$revision" \
    -l org.opencontainers.image.licenses=Apache-2.0 >/dev/null
  rm -rf "$OUT"
  mkdir -p "$(dirname "$OUT")"
  "$tools/crane" pull --format=oci "$ref" "$OUT"
  log "image $IMG: $(image_summary "$OUT")"
  log "OCI layout: $OUT (push it with \`make image-push IMG=...\`)"
}

# Stops the throwaway registry of work directory $1, if one was started.
stop_registry() {
  [[ -d "$1/registry" ]] && "$ROOT/hack/registry.sh" stop "$1/registry"
  return 0
}

# Prints the digest and size of the single image in OCI layout $1.
image_summary() {
  local index manifest size
  index="$(<"$1/index.json")"
  manifest="$(jq -r '.manifests[0].digest' <<<"$index")"
  size="$(jq '[.config.size] + [.layers[].size] | add' "$1/blobs/sha256/${manifest#sha256:}")"
  echo "$manifest, $size bytes ($((size / 1024 / 1024)) MiB) compressed"
}

push() {
  local tools
  [[ -f "$OUT/index.json" ]] || die "no image at $OUT; run \`make image\` first"
  tools="$("$ROOT/hack/controlplane/build-imagetools.sh")"
  log "pushing $OUT to $IMG"
  "$tools/crane" push "$OUT" "$IMG"
}

main() {
  (($# == 1)) || die "usage: hack/image.sh build|push"
  case "$1" in
    build) build ;;
    push) push ;;
    *) die "unknown command '$1' (build or push)" ;;
  esac
}

main "$@"
