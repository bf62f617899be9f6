#!/usr/bin/env bash
# kubectl for the Makefile's install/deploy targets: the local control plane's own build (newer
# than most system ones) when it is built, else kubectl from PATH; your $KUBECONFIG when set,
# else the local control plane's.
#
# Usage: hack/kubectl.sh <kubectl args>
set -euo pipefail

user_kubeconfig="${KUBECONFIG:-}"
# shellcheck source=controlplane/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/controlplane/env.sh"
if [[ -n "$user_kubeconfig" ]]; then
  export KUBECONFIG="$user_kubeconfig"
fi
exec kubectl "$@"
