#!/usr/bin/env bash
# Local control plane environment: paths, pinned versions, ports.
#
#   . cluster/env.sh             # in bash: sets and exports the variables
#   eval "$(cluster/env.sh)"     # in any sh (e.g. make's /bin/sh): same
#
# It only sets variables; it does not change shell options and starts nothing.

# Repository root: the parent of the folder holding this file.
CLUSTER_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Pinned versions. The build reuses a cached binary only when its stamp matches.
ETCD_VERSION="v3.7.3"
# The Kubernetes the suites run on; KUBE_VERSION=$KUBE_OLDEST (make e2e-oldest) runs them on the
# oldest one the README claims, in a cache and on ports of its own, beside the default.
KUBE_DEFAULT_VERSION="v1.37.2"
# shellcheck disable=SC2034 # read by the Makefile and .ci/run
KUBE_OLDEST="v1.36.3"
KUBE_VERSION="${KUBE_VERSION:-${KUBE_DEFAULT_VERSION}}"
KWOK_VERSION="v0.8.0"
METRICS_SERVER_VERSION="v0.8.0"

# The real-node mode (cluster/build-real.sh, cluster/real.sh).
CONTAINERD_VERSION="v2.4.2"
RUNC_VERSION="v1.5.3"
CNI_PLUGINS_VERSION="v1.9.1"
COREDNS_VERSION="v1.14.7"
LOCAL_PATH_PROVISIONER_VERSION="v0.0.30"
# The NetworkPolicy engine: kube-router's network policy controller alone (its service proxy, where
# the advisories against this version lie, is never started), patched by KUBE_ROUTER_PATCH.
KUBE_ROUTER_VERSION="v2.1.0"
KUBE_ROUTER_PATCH="${CLUSTER_ROOT}/cluster/patches/kube-router-v2.1.0-one-netns.patch"
# Kubernetes' CSI sidecars: the controller half of the expandable disks' CSI path.
CSI_PROVISIONER_VERSION="v5.3.0"
CSI_RESIZER_VERSION="v1.14.0"
PAUSE_VERSION="3.10"

if [[ "${KUBE_VERSION}" == "${KUBE_DEFAULT_VERSION}" ]]; then
	CLUSTER_CACHE="${CLUSTER_CACHE:-${CLUSTER_ROOT}/.cache/cluster}"
	_kube_ports=0
else
	CLUSTER_CACHE="${CLUSTER_CACHE:-${CLUSTER_ROOT}/.cache/cluster-${KUBE_VERSION}}"
	_kube_ports=2000
fi
CLUSTER_BIN="${CLUSTER_CACHE}/bin"
CLUSTER_BUILD="${CLUSTER_CACHE}/build"
CLUSTER_STAGES="${CLUSTER_CACHE}/stages"

# kwok (the default): fake kubelets, for scale and fault tests. real: real kubelets, containerd and
# disks on this machine (cluster/real.sh), beside a kwok control plane: its own state and ports.
CLUSTER_MODE="${CLUSTER_MODE:-kwok}"
case "${CLUSTER_MODE}" in
real)
	CLUSTER_RUN="${CLUSTER_CACHE}/real"
	_port_base=$((1000 + _kube_ports))
	;;
*)
	CLUSTER_RUN="${CLUSTER_CACHE}/run"
	_port_base=${_kube_ports}
	;;
esac

# Ports, bound to 127.0.0.1 (the real mode's API server to every address: its kubelets and Pods
# reach it on REAL_HOST_IP).
ETCD_CLIENT_PORT="${ETCD_CLIENT_PORT:-$((23790 + _port_base))}"
ETCD_PEER_PORT="${ETCD_PEER_PORT:-$((23800 + _port_base))}"
APISERVER_PORT="${APISERVER_PORT:-$((26443 + _port_base))}"
CONTROLLER_MANAGER_PORT="${CONTROLLER_MANAGER_PORT:-$((26257 + _port_base))}"
SCHEDULER_PORT="${SCHEDULER_PORT:-$((26259 + _port_base))}"
unset _port_base

# The real mode's addresses: the host's (API server, cluster DNS) and each node's, on a bridge
# interface; node N's Pods get REAL_POD_PREFIX.N.0/24.
REAL_HOST_IP="${REAL_HOST_IP:-10.200.0.1}"
REAL_NODE_PREFIX="${REAL_NODE_PREFIX:-10.200.0.1}"
REAL_POD_PREFIX="${REAL_POD_PREFIX:-10.201}"
REAL_NODES="${REAL_NODES:-3}"
KWOK_PORT="${KWOK_PORT:-$((26080 + _kube_ports))}"
METRICS_SERVER_PORT="${METRICS_SERVER_PORT:-$((26090 + _kube_ports))}"
unset _kube_ports

# Fake nodes created by up.sh.
NODES="${NODES:-12}"

KUBECONFIG="${CLUSTER_RUN}/kubeconfig"

case ":${PATH}:" in
*":${CLUSTER_BIN}:"*) ;;
*) PATH="${CLUSTER_BIN}:${PATH}" ;;
esac

export CLUSTER_ROOT ETCD_VERSION KUBE_VERSION KWOK_VERSION METRICS_SERVER_VERSION
export CONTAINERD_VERSION RUNC_VERSION CNI_PLUGINS_VERSION COREDNS_VERSION LOCAL_PATH_PROVISIONER_VERSION KUBE_ROUTER_VERSION KUBE_ROUTER_PATCH CSI_PROVISIONER_VERSION CSI_RESIZER_VERSION PAUSE_VERSION
export CLUSTER_CACHE CLUSTER_BIN CLUSTER_BUILD CLUSTER_STAGES CLUSTER_RUN
export ETCD_CLIENT_PORT ETCD_PEER_PORT APISERVER_PORT CONTROLLER_MANAGER_PORT SCHEDULER_PORT KWOK_PORT METRICS_SERVER_PORT
export NODES KUBECONFIG PATH CLUSTER_MODE REAL_HOST_IP REAL_NODE_PREFIX REAL_POD_PREFIX REAL_NODES

# folder_lock DIR: waits for and holds DIR.lock (flock) until folder_unlock. A build and
# cluster/prefetch.sh may resolve the same builder folder at once: one at a time, the second finds
# it resolved. One folder at a time per process.
folder_lock() {
	mkdir -p "$(dirname "$1")"
	exec {FOLDER_LOCK_FD}>"$1.lock"
	flock "${FOLDER_LOCK_FD}"
}
folder_unlock() { exec {FOLDER_LOCK_FD}>&-; }

# Executed rather than sourced: print the exports for eval.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
	for _var in CLUSTER_ROOT ETCD_VERSION KUBE_VERSION KWOK_VERSION METRICS_SERVER_VERSION \
		CONTAINERD_VERSION RUNC_VERSION CNI_PLUGINS_VERSION COREDNS_VERSION LOCAL_PATH_PROVISIONER_VERSION KUBE_ROUTER_VERSION KUBE_ROUTER_PATCH CSI_PROVISIONER_VERSION CSI_RESIZER_VERSION PAUSE_VERSION \
		CLUSTER_CACHE CLUSTER_BIN CLUSTER_BUILD CLUSTER_STAGES CLUSTER_RUN \
		ETCD_CLIENT_PORT ETCD_PEER_PORT APISERVER_PORT CONTROLLER_MANAGER_PORT \
		SCHEDULER_PORT KWOK_PORT METRICS_SERVER_PORT NODES KUBECONFIG PATH \
		CLUSTER_MODE REAL_HOST_IP REAL_NODE_PREFIX REAL_POD_PREFIX REAL_NODES; do
		printf 'export %s=%q\n' "${_var}" "${!_var}"
	done
	unset _var
fi
