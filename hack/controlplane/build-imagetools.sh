#!/usr/bin/env bash
# Builds the image tools from Go modules: crane (go-containerregistry), which builds and pushes the
# operator's OCI image without a container engine, and the CNCF distribution registry, the local
# OCI registry that the image round trip (hack/image-test.sh) and the OCI guest tests push to and
# pull from, and oras, the OCI artifact CLI a policy author may push guests with (the OCI tests
# check that what each side pushes, the other pulls).
#
# The versions are pinned by the committed wrapper module in imagetools/ (go.mod and go.sum only,
# with a `tool` line for each command). Like helm (build-helm.sh), both binaries are built into a
# temporary directory and moved atomically into $APP_OPERATOR_CACHE/bin/<key> (default
# ~/.cache/app-operator), where <key> names the versions and hashes the wrapper module and the Go
# version; a complete entry is reused as is, so a warm run does no Go work. Prints the directory
# holding `crane`, `registry`, `oras` and
# `htpasswd` (a bcrypt htpasswd line, for the registry's basic auth) on stdout.
#
# Usage: hack/controlplane/build-imagetools.sh
set -euo pipefail

# shellcheck source=hack/controlplane/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Builds crane and the registry into OUT and checks the versions they report:
# build_imagetools OUT.
build_imagetools() {
  local crane registry oras
  crane="$(cp_mod_version imagetools github.com/google/go-containerregistry)"
  registry="$(cp_mod_version imagetools github.com/distribution/distribution/v3)"
  oras="$(cp_mod_version imagetools oras.land/oras)"
  cp_log "building crane $crane, registry $registry and oras $oras"
  (cd "$CP_DIR/imagetools" && go build -trimpath \
    -ldflags="-s -w -X github.com/google/go-containerregistry/cmd/crane/cmd.Version=$crane" \
    -o "$1/crane" github.com/google/go-containerregistry/cmd/crane)
  (cd "$CP_DIR/imagetools" && go build -trimpath \
    -ldflags="-s -w -X github.com/distribution/distribution/v3/version.version=$registry" \
    -o "$1/registry" github.com/distribution/distribution/v3/cmd/registry)
  (cd "$CP_DIR/imagetools" && go build -trimpath -ldflags="-s -w" -o "$1/oras" \
    oras.land/oras/cmd/oras)
  (cd "$CP_DIR/imagetools" && go build -trimpath -ldflags="-s -w" -o "$1/htpasswd" ./htpasswd)
  [[ "$(printf pw | "$1/htpasswd" u)" == u:\$2a\$* ]] || cp_die "htpasswd does not print a bcrypt line"
  [[ "$("$1/crane" version)" == "$crane" ]] ||
    cp_die "crane does not report $crane: $("$1/crane" version)"
  "$1/oras" version | grep -qF "${oras#v}" ||
    cp_die "oras does not report $oras: $("$1/oras" version)"
  "$1/registry" --version | grep -qF " $registry" ||
    cp_die "registry does not report $registry: $("$1/registry" --version)"
}

main() {
  command -v go >/dev/null || cp_die "go is not installed (hack/setup.sh installs what is needed)"
  cp_go_env
  local dir
  dir="$(cp_imagetools_dir)"
  cp_cached_build "$dir" imagetools build_imagetools
  echo "$dir"
}

main "$@"
