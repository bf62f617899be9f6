#!/usr/bin/env bash
# Guest call cost benchmark: fresh-Store guest calls vs the native mapping, compile and
# precompiled-load times, for the default guest and the Python and JavaScript example guests
# (built first by hack/guests/build.sh). Prints figures; see docs/development.md.
set -euo pipefail
cd "$(dirname "$0")/.."
rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2
hack/guests/build.sh >/dev/null
exec cargo bench -q -p app-operator --bench guest
