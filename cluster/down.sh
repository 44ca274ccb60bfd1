#!/usr/bin/env bash
# Stops the local control plane by the PIDs in .cache/cluster/run/pids: TERM,
# then KILL after STOP_TIMEOUT seconds (default 15). Idempotent.
#
#   cluster/down.sh [--purge]
#
# --purge also deletes the run state (.cache/cluster/run: etcd data, certs,
# kubeconfig, logs); built binaries in .cache/cluster/bin are kept.
set -euo pipefail
shopt -s inherit_errexit

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/env.sh
. "${HERE}/env.sh"
# shellcheck source=SCRIPTDIR/lib.sh
. "${HERE}/lib.sh"

purge=0
while (($#)); do
	case "$1" in
	--purge) purge=1 ;;
	-h | --help)
		sed -n '2,8s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
		exit 0
		;;
	*)
		echo "down.sh: unknown argument $1" >&2
		exit 2
		;;
	esac
	shift
done

for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do
	stop_component "${COMPONENTS[i]}"
done

if ((purge)); then
	log "deleting ${CLUSTER_RUN}"
	rm -rf "${CLUSTER_RUN}"
fi
log "stopped"
