#!/usr/bin/env bash
# `make deploy` / `make undeploy`: config/default with the operator image set to $IMG, as
# kubebuilder's `cd config/manager && kustomize edit set image controller=${IMG}` does, but
# without editing the repository: the image override goes into a kustomize overlay in a
# temporary directory, built with `kubectl kustomize` and applied server-side.
#
# Environment: IMG (required; `name`, `name:tag` or `name@sha256:...`, a name without either
# gets `:latest`), NAMESPACE (optional: deploy into this namespace instead of
# app-operator-system; the cluster-scoped objects keep their names, so one deploy per cluster),
# DRY_RUN (optional: `server` or `client`, passed to kubectl as --dry-run=...; apply then prints
# the objects as JSON). KUBECTL defaults to hack/kubectl.sh ($KUBECONFIG, else the local
# control plane).
#
# Usage: IMG=registry.example/app-operator:v9 hack/deploy.sh build|apply|delete
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KUBECTL="${KUBECTL:-$ROOT/hack/kubectl.sh}"
# The image config/manager's kustomization deploys (its `controller` rewritten); the overlay
# replaces it. e2e/tests/deploy.rs fails if the two drift apart.
BASE_IMAGE=app-operator

log() { echo "[deploy.sh] $*" >&2; }
die() {
  echo "[deploy.sh] error: $*" >&2
  exit 1
}

# Writes the overlay's kustomization.yaml into directory $1: config/default plus the image and,
# when set, the namespace.
write_overlay() {
  local dir="$1" name="$IMG" tag="" digest="" base
  [[ -n "$name" && "$name" != *[[:space:]]* ]] || die "IMG must be an image reference, got '$IMG'"
  if [[ "$name" == *@* ]]; then
    digest="${name#*@}"
    name="${name%%@*}"
  fi
  # NB: a tag is a ':' after the last '/' (a ':' before it is a registry port).
  if [[ "${name##*/}" == *:* ]]; then
    tag="${name##*:}"
    name="${name%:*}"
  fi
  [[ -n "$digest" || -n "$tag" ]] || tag=latest
  # NB: kustomize takes a base only as a path relative to the kustomization.
  base="$(realpath --relative-to="$dir" "$ROOT/config/default")"
  {
    echo "resources:"
    echo "- $base"
    [[ -z "${NAMESPACE:-}" ]] || echo "namespace: $NAMESPACE"
    echo "images:"
    echo "- name: $BASE_IMAGE"
    echo "  newName: $name"
    [[ -z "$tag" ]] || echo "  newTag: \"$tag\""
    [[ -z "$digest" ]] || echo "  digest: $digest"
  } >"$dir/kustomization.yaml"
}

main() {
  local cmd="${1:-}"
  [[ "$cmd" =~ ^(build|apply|delete)$ ]] || die "usage: IMG=<image> $0 build|apply|delete"
  : "${IMG:?set IMG to the operator image, e.g. IMG=registry.example/app-operator:v9}"
  TMP="$(mktemp -d)"
  trap 'rm -rf "$TMP"' EXIT
  write_overlay "$TMP"
  "$KUBECTL" kustomize "$TMP" >"$TMP/manifests.yaml"
  case "$cmd" in
    build) cat "$TMP/manifests.yaml" ;;
    apply)
      if [[ -n "${DRY_RUN:-}" ]]; then
        "$KUBECTL" apply --server-side --dry-run="$DRY_RUN" -o json -f "$TMP/manifests.yaml"
      else
        log "deploying image $IMG"
        "$KUBECTL" apply --server-side -f "$TMP/manifests.yaml"
      fi
      ;;
    delete)
      "$KUBECTL" delete --ignore-not-found ${DRY_RUN:+--dry-run="$DRY_RUN"} -f "$TMP/manifests.yaml"
      ;;
  esac
}

main "$@"
