#!/usr/bin/env bash
# Regenerates the k8s wrapper module (k8s/go.mod + go.sum) for a Kubernetes version: requires
# k8s.io/kubernetes at that version, with a `replace` for every staging module that version's own
# go.mod lists (at the matching v0.MINOR.PATCH), and `tool` lines for the four commands.
#
# Usage: hack/controlplane/gen-k8s-mod.sh v1.37.2   (then commit k8s/go.mod and k8s/go.sum)
set -euo pipefail

# shellcheck source=hack/controlplane/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

COMMANDS=(kube-apiserver kube-controller-manager kube-scheduler kubectl)

main() {
  local version="${1:-}" staging gomod module
  [[ "$version" =~ ^v1\.[0-9]+\.[0-9]+$ ]] || cp_die "usage: $0 v1.MINOR.PATCH"
  staging="v0.${version#v1.}"
  cp_go_env
  export GOFLAGS=
  gomod="$(cd /tmp && go mod download -json "k8s.io/kubernetes@$version" |
    awk -F'"' '$2 == "GoMod" { print $4 }')"
  [[ -f "$gomod" ]] || cp_die "no go.mod for k8s.io/kubernetes@$version"
  {
    printf 'module local.invalid/app-operator/controlplane/k8s\n\ngo 1.26.0\n\n'
    printf 'require k8s.io/kubernetes %s\n\nreplace (\n' "$version"
    awk '$2 == "=>" && $3 ~ /^\.\/staging\/src\// { print $1 }' "$gomod" | while read -r module; do
      printf '\t%s => %s %s\n' "$module" "$module" "$staging"
    done
    printf ')\n\ntool (\n'
    printf '\tk8s.io/kubernetes/cmd/%s\n' "${COMMANDS[@]}"
    printf ')\n'
  } >"$CP_DIR/k8s/go.mod"
  rm -f "$CP_DIR/k8s/go.sum"
  (cd "$CP_DIR/k8s" && go mod tidy)
  cp_log "k8s/go.mod now pins $version with staging modules at $staging; commit k8s/go.mod and go.sum"
}

main "$@"
