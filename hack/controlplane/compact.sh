#!/usr/bin/env bash
# Compacts the local control plane's etcd at its current revision (through etcd's HTTP gateway),
# so that every resourceVersion handed out so far is too old for etcd: a fault scenario of
# `make chaos`. Prints the revision compacted at.
#
# Usage: hack/controlplane/compact.sh
set -euo pipefail

# shellcheck source=hack/controlplane/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

main() {
  local etcd="http://127.0.0.1:$CP_ETCD_PORT" revision
  revision="$(curl -fsS -X POST "$etcd/v3/kv/range" -d '{"key":"AA==","limit":1}' |
    grep -o '"revision":"[0-9]*"' | head -n1 | grep -o '[0-9]*')" ||
    cp_die "could not read etcd's revision at $etcd"
  curl -fsS -X POST "$etcd/v3/kv/compaction" \
    -d "{\"revision\":\"$revision\",\"physical\":true}" >/dev/null ||
    cp_die "compaction at revision $revision failed"
  cp_log "etcd compacted at revision $revision"
  echo "$revision"
}

main "$@"
