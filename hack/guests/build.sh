#!/usr/bin/env bash
# Builds the Python and JavaScript example guests (examples/guests/{python,javascript}) into
# $APP_OPERATOR_GUESTS_DIR (default target/guests/): python.wasm with componentize-py and
# javascript.wasm with ComponentizeJS, the tools from install-tools.sh, on contract 0.1.0; and
# python-conditions.wasm and javascript-conditions.wasm, their 0.2.0 variants (conditions.py,
# conditions.js) that also report a condition and an Event. A guest is rebuilt only
# when its sources, wit/, this script or its tool's version change (a hash of them is kept in
# <guest>.wasm.key beside it). Prints the paths on stdout.
#
# Usage: hack/guests/build.sh
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=hack/guests/lib.sh
source "$HERE/lib.sh"

OUT="${APP_OPERATOR_GUESTS_DIR:-$GUESTS_ROOT/target/guests}"

# The hash of everything a guest's build reads: key TOOL_DIR SOURCE_DIR.
key() {
  (
    cd "$GUESTS_ROOT"
    echo "$1"
    find "$2" wit -type f \( -name '*.py' -o -name '*.js' -o -name '*.wit' \) -print0 |
      sort -z | xargs -0 sha256sum
    sha256sum hack/guests/build.sh hack/guests/lib.sh
  ) | sha256sum | cut -c1-64
}

# Builds NAME.wasm with BUILD_FUNCTION unless its key is unchanged: build NAME TOOL_DIR SOURCE_DIR FN.
build() {
  local name="$1" tool="$2" src="$3" fn="$4" wasm="$OUT/$1.wasm" k start
  k="$(key "$tool" "$src")"
  if [[ -f "$wasm" && "$(cat "$wasm.key" 2>/dev/null)" == "$k" ]]; then
    echo "$wasm"
    return
  fi
  guests_log "building $name.wasm from $src"
  start=$SECONDS
  mkdir -p "$OUT"
  "$fn" "$GUESTS_ROOT/$src" "$wasm.tmp"
  mv "$wasm.tmp" "$wasm"
  echo "$k" >"$wasm.key"
  guests_log "built $name.wasm ($(stat -c %s "$wasm") bytes) in $((SECONDS - start)) s"
  echo "$wasm"
}

build_python() {
  (cd "$1" && guests_py -d "$GUESTS_ROOT/wit/appservice.wit" -w appservice-policy \
    componentize app -o "$2" >/dev/null)
}

build_python_conditions() {
  (cd "$1" && guests_py -d "$GUESTS_ROOT/wit/0.2.0/appservice.wit" -w appservice-policy \
    componentize conditions -o "$2" >/dev/null)
}

build_javascript_conditions() {
  node "$(guests_js_dir)/node_modules/@bytecodealliance/componentize-js/src/cli.js" \
    "$1/conditions.js" --wit "$GUESTS_ROOT/wit/0.2.0" --world-name appservice-policy \
    --disable http fetch-event -o "$2" >/dev/null
}

build_javascript() {
  # NB: ComponentizeJS wants the WIT directory, not the file. `fetch` (wasi:http) is left out:
  # the host provides no HTTP, and a component that imports it would not load.
  node "$(guests_js_dir)/node_modules/@bytecodealliance/componentize-js/src/cli.js" \
    "$1/policy.js" --wit "$GUESTS_ROOT/wit" --world-name appservice-policy \
    --disable http fetch-event -o "$2" >/dev/null
}

main() {
  "$HERE/install-tools.sh" >/dev/null
  build python "$(guests_py_dir)" examples/guests/python build_python
  build javascript "$(guests_js_dir)" examples/guests/javascript build_javascript
  build python-conditions "$(guests_py_dir)" examples/guests/python build_python_conditions
  build javascript-conditions "$(guests_js_dir)" examples/guests/javascript \
    build_javascript_conditions
}

main "$@"
