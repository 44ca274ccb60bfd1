#!/usr/bin/env bash
# Simulates the loss and return of fake nodes on the local cluster.
#
#   cluster/node.sh not-ready NODE...  # kwok stops heartbeating NODE
#   cluster/node.sh ready NODE...      # kwok manages NODE again
#
# not-ready takes over the node's lease in kube-node-lease for a day, so kwok
# stops renewing it and stops acting on the node's pods; the node lifecycle
# controller marks it Ready=Unknown after NODE_MONITOR_GRACE_PERIOD (20s by
# default) and taints it node.kubernetes.io/unreachable. ready deletes the
# lease: kwok recreates it and the node is Ready again within a few seconds.
# not-ready cordons the node too, and ready uncordons it: a status heartbeat
# kwok scheduled before the takeover still lands, marking the node Ready for a
# moment, and nothing may be scheduled onto it then.
set -euo pipefail
shopt -s inherit_errexit

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/env.sh
. "${HERE}/env.sh"

usage() {
	sed -n '2,14s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

if (($# < 2)); then
	usage >&2
	exit 2
fi
action=$1
shift

case "${action}" in
not-ready)
	now=$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ)
	for node in "$@"; do
		kubectl cordon "${node}" >/dev/null
		kubectl apply --server-side --force-conflicts --field-manager=cluster-node-sh -f - <<YAML
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: ${node}
  namespace: kube-node-lease
spec:
  holderIdentity: cluster-node-sh-not-ready
  leaseDurationSeconds: 86400
  renewTime: "${now}"
YAML
	done
	;;
ready)
	for node in "$@"; do
		kubectl delete lease --namespace kube-node-lease --ignore-not-found "${node}"
		# A node deleted meanwhile comes back uncordoned when it is recreated.
		if kubectl get node "${node}" >/dev/null 2>&1; then
			kubectl uncordon "${node}" >/dev/null
		fi
	done
	;;
-h | --help)
	usage
	;;
*)
	usage >&2
	exit 2
	;;
esac
