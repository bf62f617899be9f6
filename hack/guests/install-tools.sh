#!/usr/bin/env bash
# Installs the tools that build the Python and JavaScript example guests, pinned, each into its
# own cache entry under $APP_OPERATOR_CACHE/guest-tools/ (default ~/.cache/app-operator):
#   componentize-py-<version>/        componentize-py from PyPI (`pip install --target`)
#   componentize-js-<version>_<hash>/ node_modules from hack/guests/js-tools/package-lock.json
#                                     (ComponentizeJS from npm, `npm ci`)
# An entry is built in a temporary directory and renamed into place when complete, so a warm run
# only checks that the entries exist. Prints `<tool> <dir>` lines on stdout.
#
# Usage: hack/guests/install-tools.sh
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=hack/guests/lib.sh
source "$HERE/lib.sh"

# Fills cache entry DIR once with FUNCTION TMPDIR: cached DIR FUNCTION.
cached() {
  local dir="$1" fill="$2" tmp
  [[ -f "$dir/.complete" ]] && return
  mkdir -p "$(dirname "$dir")"
  tmp="$(mktemp -d "$dir.tmp.XXXXXX")"
  "$fill" "$tmp"
  touch "$tmp/.complete"
  rm -rf "$dir"
  mv "$tmp" "$dir"
}

fill_py() {
  guests_log "installing componentize-py $COMPONENTIZE_PY_VERSION from PyPI"
  # NB: --target rather than a venv: a venv records its own path, and the entry is moved into
  # place after it is filled. guests_py runs the tool from it.
  python3 -m pip install -q --disable-pip-version-check --no-warn-script-location --root-user-action=ignore \
    --target "$1/lib" "componentize-py==$COMPONENTIZE_PY_VERSION"
  PYTHONPATH="$1/lib" guests_py_run --version >/dev/null
}

fill_js() {
  guests_log "installing ComponentizeJS from npm (js-tools/package-lock.json)"
  cp "$HERE/js-tools/package.json" "$HERE/js-tools/package-lock.json" "$1/"
  (cd "$1" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
}

main() {
  command -v python3 >/dev/null || guests_die "python3 is not installed"
  command -v npm >/dev/null || guests_die "npm is not installed"
  cached "$(guests_py_dir)" fill_py
  cached "$(guests_js_dir)" fill_js
  echo "componentize-py $(guests_py_dir)"
  echo "componentize-js $(guests_js_dir)"
}

main "$@"
