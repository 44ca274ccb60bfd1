# shellcheck shell=bash
# shellcheck disable=SC2034 # variables used by the scripts that source this
# Helpers shared by up.sh and down.sh. Sourced after env.sh; not a command.

PKI_DIR="${CLUSTER_RUN}/pki"
LOG_DIR="${CLUSTER_RUN}/logs"
PID_DIR="${CLUSTER_RUN}/pids"

# Components in start order; down.sh stops them in reverse.
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok metrics-server)
if [[ "${CLUSTER_MODE}" == real ]]; then
	# Real kubelets (cluster/real.sh) stand in for kwok; they serve no resource metrics API here.
	COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler)
fi

log() { printf '[cluster] %s\n' "$*"; }

die() {
	printf '[cluster] error: %s\n' "$*" >&2
	exit 1
}

pid_file() { echo "${PID_DIR}/$1.pid"; }

# Succeeds when process $2 is alive and runs this cluster's binary $1.
is_component_pid() {
	local name=$1 pid=$2 exe
	exe=$(readlink "/proc/${pid}/exe" 2>/dev/null) || return 1
	exe=${exe% (deleted)}
	# The kernel names the binary by its real path: .cache may be a link (a worktree's to a clone's).
	[[ "${exe}" == "${CLUSTER_BIN}/${name}" || "${exe}" == "$(realpath -m "${CLUSTER_BIN}/${name}")" ]]
}

# Prints the PID of component $1 when its pid file names a live process that
# runs this cluster's binary of that name; fails otherwise.
running_pid() {
	local name=$1 file pid
	file=$(pid_file "${name}")
	[[ -f "${file}" ]] || return 1
	pid=$(<"${file}")
	[[ "${pid}" =~ ^[0-9]+$ ]] || return 1
	is_component_pid "${name}" "${pid}" || return 1
	echo "${pid}"
}

# Prints the last lines of component $1's log to stderr.
log_tail() {
	local file="${LOG_DIR}/$1.log"
	if [[ -f "${file}" ]]; then
		printf '[cluster] last lines of %s:\n' "${file}" >&2
		tail -n "${2:-40}" "${file}" >&2
	fi
}

# Stops component $1 by its pid file: TERM, then KILL after STOP_TIMEOUT
# seconds. Does nothing when it is not running.
stop_component() {
	local name=$1 pid deadline
	if ! pid=$(running_pid "${name}"); then
		rm -f "$(pid_file "${name}")"
		return 0
	fi
	log "stopping ${name} (pid ${pid})"
	kill -TERM "${pid}" 2>/dev/null || true
	deadline=$((SECONDS + ${STOP_TIMEOUT:-15}))
	while is_component_pid "${name}" "${pid}"; do
		if ((SECONDS >= deadline)); then
			log "${name} (pid ${pid}) did not exit after TERM; sending KILL"
			kill -KILL "${pid}" 2>/dev/null || true
			break
		fi
		sleep 0.2
	done
	while is_component_pid "${name}" "${pid}"; do sleep 0.1; done
	rm -f "$(pid_file "${name}")"
}
