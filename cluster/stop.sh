#!/usr/bin/env bash
# Stops some components of the local control plane, the others left running:
# TERM, then KILL after STOP_TIMEOUT seconds (default 15), as down.sh does.
# up.sh starts again whatever is not running.
#
#   cluster/stop.sh NAME...   # NAME: etcd kube-apiserver kube-controller-manager kube-scheduler kwok metrics-server
#
# Components are stopped in the order given. Uses the same environment as
# up.sh and down.sh (CLUSTER_CACHE, ports). Idempotent.
set -euo pipefail
shopt -s inherit_errexit

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/env.sh
. "${HERE}/env.sh"
# shellcheck source=SCRIPTDIR/lib.sh
. "${HERE}/lib.sh"

usage() {
	sed -n '2,9s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

if (($# == 0)); then
	usage >&2
	exit 2
fi
for name in "$@"; do
	case "${name}" in
	-h | --help)
		usage
		exit 0
		;;
	esac
	known=0
	for c in "${COMPONENTS[@]}"; do
		[[ "${name}" == "${c}" ]] && known=1
	done
	if ((!known)); then
		echo "stop.sh: unknown component ${name} (want: ${COMPONENTS[*]})" >&2
		exit 2
	fi
done
for name in "$@"; do
	stop_component "${name}"
done
