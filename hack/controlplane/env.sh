# shellcheck shell=bash
# Source this file to use the local control plane from a shell or a script:
#
#   source hack/controlplane/env.sh
#
# Exports CP_BIN (the cached binary directory; see build.sh), puts it first on PATH so the built
# kubectl wins over an older system one, exports HELM (the helm that build-helm.sh builds, for
# the chart's tests), TOXIPROXY_SERVER (the toxiproxy-server that build-toxiproxy.sh builds, for
# the fault tests) and KUBECONFIG (the admin kubeconfig that up.sh writes). It builds and starts
# nothing. Sets no shell options; defines the cp_* helpers of lib.sh.

# shellcheck source=hack/controlplane/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CP_BIN="$(cp_bin_dir)"
export CP_BIN
HELM="$(cp_helm_dir)/helm"
export HELM
TOXIPROXY_SERVER="$(cp_toxiproxy_dir)/toxiproxy-server"
export TOXIPROXY_SERVER
export KUBECONFIG="$CP_CLUSTER_DIR/kubeconfig"
case ":$PATH:" in
  *":$CP_BIN:"*) ;;
  *) export PATH="$CP_BIN:$PATH" ;;
esac
