#!/usr/bin/env bash
# `make image-test`: the engine-free image round trip. Builds the image (hack/image.sh build),
# pushes it to a local OCI registry started for the test (hack/registry.sh, a free 127.0.0.1 port,
# storage in a temporary directory), pulls it back and checks it: OCI media types, one layer
# holding only /app-operator and the precompiled default guest in /guests (no shell, nothing
# else), user 65532:65532, entrypoint and command, APP_OPERATOR_GUEST_PRECOMPILED_DIR, linux/amd64,
# the OCI labels, the pushed digest equal to the built one, and the size within SIZE_LIMIT_MIB.
# Then runs the binary extracted from the pulled layer, as the image's user with an empty
# environment: `--version`, `render` of the sample AppService, and `guest precompile`, whose
# artifact must be the one the image holds (the name is the guest's digest and the engine's
# hash, so this machine's engine loads it). Prints the image size.
# Exits non-zero on the first failed check.
#
# Cold, the musl release build dominates (see docs/development.md); crane and the registry are
# built from Go modules on first use and cached.
#
# Environment: CARGO (default cargo), SIZE_LIMIT_MIB (default 24; the image is 16.6 MiB).
#
# Usage: hack/image-test.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SIZE_LIMIT_MIB="${SIZE_LIMIT_MIB:-24}"
SAMPLE="$ROOT/config/samples/apps_v1alpha1_appservice.yaml"

log() { echo "[image-test.sh] $*" >&2; }
fail() {
  echo "[image-test.sh] FAIL: $*" >&2
  exit 1
}
checks=0
# check DESCRIPTION ACTUAL EXPECTED
check() {
  [[ "$2" == "$3" ]] || fail "$1: got '$2', want '$3'"
  checks=$((checks + 1))
  log "ok: $1 = $3"
}

main() {
  local tools start addr ref built pushed manifest config size layers out version
  WORK="$(mktemp -d)"
  trap '"$ROOT/hack/registry.sh" stop "$WORK/registry"; rm -rf "$WORK"' EXIT
  local work="$WORK"
  tools="$("$ROOT/hack/controlplane/build-imagetools.sh")"

  start=$SECONDS
  OUT="$work/oci" IMG=app-operator:image-test "$ROOT/hack/image.sh" build
  log "built in $((SECONDS - start)) s"
  built="$(jq -r '.manifests[0].digest' "$work/oci/index.json")"

  start=$SECONDS
  addr="$("$ROOT/hack/registry.sh" start "$work/registry")"
  ref="$addr/app-operator:test"
  OUT="$work/oci" IMG="$ref" "$ROOT/hack/image.sh" push >/dev/null
  pushed="$("$tools/crane" digest "$ref")"
  check "digest in the registry" "$pushed" "$built"
  "$tools/crane" pull --format=oci "$ref" "$work/pulled"
  check "digest pulled back" "$(jq -r '.manifests[0].digest' "$work/pulled/index.json")" "$built"

  manifest="$("$tools/crane" manifest "$ref")"
  config="$("$tools/crane" config "$ref")"
  check "manifest media type" "$(jq -r .mediaType <<<"$manifest")" \
    application/vnd.oci.image.manifest.v1+json
  check "config media type" "$(jq -r .config.mediaType <<<"$manifest")" \
    application/vnd.oci.image.config.v1+json
  layers="$(jq -r '[.layers[].mediaType] | join(",")' <<<"$manifest")"
  check "layers" "$layers" application/vnd.oci.image.layer.v1.tar+gzip
  check "os/architecture" "$(jq -r '"\(.os)/\(.architecture)"' <<<"$config")" linux/amd64
  check "user" "$(jq -r .config.User <<<"$config")" 65532:65532
  check "entrypoint" "$(jq -c .config.Entrypoint <<<"$config")" '["/app-operator"]'
  check "cmd" "$(jq -c .config.Cmd <<<"$config")" '["run"]'
  check "precompiled guests" \
    "$(jq -r '.config.Env[] | select(startswith("APP_OPERATOR_GUEST_PRECOMPILED_DIR="))' <<<"$config")" \
    APP_OPERATOR_GUEST_PRECOMPILED_DIR=/guests
  check "exposed ports" "$(jq -c '.config.ExposedPorts | keys' <<<"$config")" \
    '["8080/tcp","8081/tcp"]'
  check "label title" "$(jq -r '.config.Labels["org.opencontainers.image.title"]' <<<"$config")" \
    app-operator
  check "label revision" \
    "$(jq -r '.config.Labels["org.opencontainers.image.revision"]' <<<"$config")" \
    "$(git -C "$ROOT" rev-parse HEAD)"
  size="$(jq '[.config.size] + [.layers[].size] | add' <<<"$manifest")"
  ((size <= SIZE_LIMIT_MIB * 1024 * 1024)) ||
    fail "image size $size bytes is over the $SIZE_LIMIT_MIB MiB limit"
  checks=$((checks + 1))

  # The pulled image's filesystem: the binary, root-owned and executable, and one precompiled
  # guest, root-owned and read-only.
  mkdir "$work/rootfs"
  "$tools/crane" export "$ref" "$work/rootfs.tar"
  check "files in the image" \
    "$(tar --list --file "$work/rootfs.tar" | sed 's/[0-9a-f]\{64\}-[0-9a-f]\{16\}/ARTIFACT/' | tr '\n' ' ')" \
    "app-operator guests guests/ARTIFACT.cwasm "
  check "owners and modes" \
    "$(tar --list --verbose --numeric-owner --file "$work/rootfs.tar" | awk '{ print $1, $2 }' | tr '\n' ' ')" \
    "-rwxr-xr-x 0/0 drwxr-xr-x 0/0 -rw-r--r-- 0/0 "
  tar --extract --file "$work/rootfs.tar" --directory "$work/rootfs"
  chmod 0755 "$work" # the image's user must reach the binary in the temporary directory
  if readelf -l "$work/rootfs/app-operator" | grep -q 'Requesting program interpreter'; then
    fail "the image's binary is not static"
  fi
  checks=$((checks + 1))

  # Run it as the image would: its user, an empty environment, no shell.
  as_image_user() {
    setpriv --reuid=65532 --regid=65532 --clear-groups -- env -i "$work/rootfs/app-operator" "$@"
  }
  version="$(as_image_user --version)"
  check "--version" "$version" \
    "app-operator $(jq -r '.config.Labels["org.opencontainers.image.version"]' <<<"$config")"
  cp "$SAMPLE" "$work/sample.yaml"
  out="$(as_image_user render -f "$work/sample.yaml")"
  check "render: kinds" "$(grep '^kind:' <<<"$out" | tr '\n' ' ')" "kind: Deployment kind: Service "
  check "render: names" "$(grep -c '^  name: nginx$' <<<"$out")" 2
  mkdir "$work/again" && chmod 0777 "$work/again"
  check "the shipped guest is this engine's" \
    "$(as_image_user guest precompile --out-dir "$work/again" | xargs basename)" \
    "$(cd "$work/rootfs/guests" && ls)"
  log "round trip (push, pull, checks, runs) in $((SECONDS - start)) s"

  echo "image $built: $size bytes ($(awk -v s="$size" 'BEGIN { printf "%.1f", s / 1048576 }') MiB) compressed, binary $(stat -c %s "$work/rootfs/app-operator") bytes uncompressed"
  echo "image-test: $checks passed, 0 failed"
}

main "$@"
