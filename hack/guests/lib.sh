#!/usr/bin/env bash
# The guest tools' versions and cache entries, shared by install-tools.sh and build.sh. Safe to
# source: it sets no shell options and runs nothing.

GUESTS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
GUESTS_CACHE="${APP_OPERATOR_CACHE:-$HOME/.cache/app-operator}/guest-tools"

# NB: 0.25.1 builds CPython 3.14 guests against wit/ as it is (tried in issue 15).
COMPONENTIZE_PY_VERSION=0.25.1

guests_log() { echo "[guests] $*" >&2; }
guests_die() {
  echo "[guests] error: $*" >&2
  exit 1
}

# componentize-py's install directory (its wheel is abi3, so any python3 runs it).
guests_py_dir() { echo "$GUESTS_CACHE/componentize-py-$COMPONENTIZE_PY_VERSION"; }

# Runs componentize-py with PYTHONPATH set to its install: guests_py_run ARGS...
guests_py_run() {
  python3 -c 'import sys; from componentize_py import script; sys.argv[0] = "componentize-py"; sys.exit(script())' "$@"
}

# componentize-py from the cache: guests_py ARGS...
guests_py() { PYTHONPATH="$(guests_py_dir)/lib" guests_py_run "$@"; }

# The node_modules of the JavaScript tools: the ComponentizeJS version from the lock file plus
# a hash of the lock file, so any change of a pinned version makes a new entry.
guests_js_dir() {
  local lock="$GUESTS_ROOT/hack/guests/js-tools/package-lock.json" version sum
  version="$(sed -n '/"node_modules\/@bytecodealliance\/componentize-js"/,/version/s/.*"version": "\(.*\)".*/\1/p' "$lock")"
  sum="$(sha256sum "$lock" | cut -c1-12)"
  echo "$GUESTS_CACHE/componentize-js-${version}_$sum"
}
