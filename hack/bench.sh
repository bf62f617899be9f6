#!/usr/bin/env bash
# Guest call cost benchmark: fresh-Store guest calls vs the native mapping, compile and
# precompiled-load times. Prints figures; see docs/development.md.
set -euo pipefail
cd "$(dirname "$0")/.."
rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2
exec cargo bench -q -p app-operator --bench guest
