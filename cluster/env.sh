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
KUBE_VERSION="v1.37.2"
KWOK_VERSION="v0.8.0"
METRICS_SERVER_VERSION="v0.8.0"

CLUSTER_CACHE="${CLUSTER_CACHE:-${CLUSTER_ROOT}/.cache/cluster}"
CLUSTER_BIN="${CLUSTER_CACHE}/bin"
CLUSTER_BUILD="${CLUSTER_CACHE}/build"
CLUSTER_STAGES="${CLUSTER_CACHE}/stages"
CLUSTER_RUN="${CLUSTER_CACHE}/run"

# Ports, all bound to 127.0.0.1.
ETCD_CLIENT_PORT="${ETCD_CLIENT_PORT:-23790}"
ETCD_PEER_PORT="${ETCD_PEER_PORT:-23800}"
APISERVER_PORT="${APISERVER_PORT:-26443}"
CONTROLLER_MANAGER_PORT="${CONTROLLER_MANAGER_PORT:-26257}"
SCHEDULER_PORT="${SCHEDULER_PORT:-26259}"
KWOK_PORT="${KWOK_PORT:-26080}"
METRICS_SERVER_PORT="${METRICS_SERVER_PORT:-26090}"

# Fake nodes created by up.sh.
NODES="${NODES:-12}"

KUBECONFIG="${CLUSTER_RUN}/kubeconfig"

case ":${PATH}:" in
*":${CLUSTER_BIN}:"*) ;;
*) PATH="${CLUSTER_BIN}:${PATH}" ;;
esac

export CLUSTER_ROOT ETCD_VERSION KUBE_VERSION KWOK_VERSION METRICS_SERVER_VERSION
export CLUSTER_CACHE CLUSTER_BIN CLUSTER_BUILD CLUSTER_STAGES CLUSTER_RUN
export ETCD_CLIENT_PORT ETCD_PEER_PORT APISERVER_PORT CONTROLLER_MANAGER_PORT SCHEDULER_PORT KWOK_PORT METRICS_SERVER_PORT
export NODES KUBECONFIG PATH

# Executed rather than sourced: print the exports for eval.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
	for _var in CLUSTER_ROOT ETCD_VERSION KUBE_VERSION KWOK_VERSION METRICS_SERVER_VERSION \
		CLUSTER_CACHE CLUSTER_BIN CLUSTER_BUILD CLUSTER_STAGES CLUSTER_RUN \
		ETCD_CLIENT_PORT ETCD_PEER_PORT APISERVER_PORT CONTROLLER_MANAGER_PORT \
		SCHEDULER_PORT KWOK_PORT METRICS_SERVER_PORT NODES KUBECONFIG PATH; do
		printf 'export %s=%q\n' "${_var}" "${!_var}"
	done
	unset _var
fi
