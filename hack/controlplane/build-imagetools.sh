#!/usr/bin/env bash
# Builds the image tools from Go modules: crane (go-containerregistry), which builds and pushes the
# operator's OCI image without a container engine, and the CNCF distribution registry, the local
# OCI registry that the image round trip (hack/image-test.sh) pushes to and pulls from.
#
# The versions are pinned by the committed wrapper module in imagetools/ (go.mod and go.sum only,
# with a `tool` line for each command). Like helm (build-helm.sh), both binaries are built into a
# temporary directory and moved atomically into $APP_OPERATOR_CACHE/bin/<key> (default
# ~/.cache/app-operator), where <key> names the versions and hashes the wrapper module and the Go
# version; a complete entry is reused as is, so a warm run does no Go work. Prints the directory
# holding `crane` and `registry` on stdout.
#
# Usage: hack/controlplane/build-imagetools.sh
set -euo pipefail

# shellcheck source=hack/controlplane/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

main() {
  command -v go >/dev/null || cp_die "go is not installed (hack/setup.sh installs what is needed)"
  cp_go_env
  local dir tmp start crane registry
  dir="$(cp_imagetools_dir)"
  if [[ -f "$dir/.complete" ]]; then
    cp_log "up to date: $dir"
    echo "$dir"
    return
  fi
  mkdir -p "$CP_CACHE/bin"
  # NB: one build at a time; a second caller waits, then finds the finished entry.
  exec 9>"$CP_CACHE/bin/.build-imagetools.lock"
  flock 9
  if [[ -f "$dir/.complete" ]]; then
    echo "$dir"
    return
  fi
  start=$SECONDS
  crane="$(cp_mod_version imagetools github.com/google/go-containerregistry)"
  registry="$(cp_mod_version imagetools github.com/distribution/distribution/v3)"
  tmp="$(mktemp -d "$CP_CACHE/bin/.tmp.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  cp_log "building crane $crane and registry $registry"
  (cd "$CP_DIR/imagetools" && go build -trimpath \
    -ldflags="-s -w -X github.com/google/go-containerregistry/cmd/crane/cmd.Version=$crane" \
    -o "$tmp/crane" github.com/google/go-containerregistry/cmd/crane)
  (cd "$CP_DIR/imagetools" && go build -trimpath \
    -ldflags="-s -w -X github.com/distribution/distribution/v3/version.version=$registry" \
    -o "$tmp/registry" github.com/distribution/distribution/v3/cmd/registry)
  [[ "$("$tmp/crane" version)" == "$crane" ]] ||
    cp_die "crane does not report $crane: $("$tmp/crane" version)"
  "$tmp/registry" --version | grep -qF " $registry" ||
    cp_die "registry does not report $registry: $("$tmp/registry" --version)"
  touch "$tmp/.complete"
  rm -rf "$dir"
  mv -T "$tmp" "$dir"
  trap - EXIT
  cp_log "built in $((SECONDS - start)) s: $dir"
  echo "$dir"
}

main "$@"
