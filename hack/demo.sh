#!/usr/bin/env bash
# The demo behind `make demo`: the local control plane, the operator as a local process, and the
# samples of both profiles, shown converging.
#
#   hack/demo.sh          # build what is missing, start everything, apply the samples (idempotent)
#   hack/demo.sh stop     # delete the demo namespace, stop the operator and the control plane
#
# The operator runs from bin/celld-operator (make demo builds it) on its ServiceAccount's token,
# manages the demo namespace only (DEMO_NAMESPACE, default celld-demo), logs to
# .cache/demo/operator.log and serves metrics on DEMO_METRICS_ADDR (default 127.0.0.1:28080).
set -euo pipefail
shopt -s inherit_errexit

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=SCRIPTDIR/../cluster/env.sh
. "${ROOT}/cluster/env.sh"

NAMESPACE="${DEMO_NAMESPACE:-celld-demo}"
METRICS_ADDR="${DEMO_METRICS_ADDR:-127.0.0.1:28080}"
PROBE_ADDR="${DEMO_PROBE_ADDR:-127.0.0.1:28081}"
DEMO_DIR="${ROOT}/.cache/demo"
OPERATOR="${ROOT}/bin/celld-operator"
PID_FILE="${DEMO_DIR}/operator.pid"
LOG_FILE="${DEMO_DIR}/operator.log"
OPERATOR_KUBECONFIG="${DEMO_DIR}/operator.kubeconfig"
WATCH_TIMEOUT="${DEMO_WATCH_TIMEOUT:-180}"

log() { printf '[demo] %s\n' "$*"; }
die() {
	printf '[demo] error: %s\n' "$*" >&2
	exit 1
}

# Prints the operator's PID when the pid file names a live process running the demo's binary
# (shown " (deleted)" once make build has replaced the file).
operator_pid() {
	local pid exe
	[[ -f "${PID_FILE}" ]] || return 1
	pid=$(<"${PID_FILE}")
	[[ "${pid}" =~ ^[0-9]+$ ]] || return 1
	exe=$(readlink "/proc/${pid}/exe" 2>/dev/null) || return 1
	[[ "${exe% (deleted)}" == "${OPERATOR}" ]] || return 1
	echo "${pid}"
}

stop_operator() {
	local pid
	if ! pid=$(operator_pid); then
		rm -f "${PID_FILE}"
		return 0
	fi
	log "stopping the operator (pid ${pid})"
	kill -TERM "${pid}" 2>/dev/null || true
	for _ in $(seq 150); do
		operator_pid >/dev/null || break
		sleep 0.2
	done
	if operator_pid >/dev/null; then
		log "the operator did not exit after TERM; sending KILL"
		kill -KILL "${pid}" 2>/dev/null || true
		while operator_pid >/dev/null; do sleep 0.1; done
	fi
	rm -f "${PID_FILE}"
}

# operator_kubeconfig writes a kubeconfig with a token of the operator's ServiceAccount: the
# operator runs with exactly the rights deploy/rbac grants it, and deploy/'s admission policy lets
# that identity alone write reservations.
operator_kubeconfig() {
	local token
	token=$(kubectl create token celld-operator --namespace celld-system --duration=24h)
	kubectl config view --raw --minify --flatten >"${OPERATOR_KUBECONFIG}"
	kubectl --kubeconfig "${OPERATOR_KUBECONFIG}" config set-credentials celld-operator --token="${token}" >/dev/null
	kubectl --kubeconfig "${OPERATOR_KUBECONFIG}" config set-context --current --user=celld-operator >/dev/null
	chmod 600 "${OPERATOR_KUBECONFIG}"
}

start_operator() {
	local pid
	if pid=$(operator_pid); then
		# make build rewrites the file every time; only a different binary is worth a restart.
		if cmp -s "/proc/${pid}/exe" "${OPERATOR}"; then
			log "operator already running (pid ${pid}); log: ${LOG_FILE}"
			return 0
		fi
		log "bin/celld-operator changed: restarting the operator"
		stop_operator
	fi
	mkdir -p "${DEMO_DIR}"
	operator_kubeconfig
	printf '=== %s starting celld-operator\n' "$(date -u +%FT%TZ)" >>"${LOG_FILE}"
	# A new session keeps the operator running after this script and its terminal exit.
	setsid "${OPERATOR}" run --kubeconfig "${OPERATOR_KUBECONFIG}" --namespace "${NAMESPACE}" \
		--leader-elect=false --metrics-bind-address "${METRICS_ADDR}" --metrics-secure=false \
		--health-probe-bind-address "${PROBE_ADDR}" --log-format console \
		</dev/null >>"${LOG_FILE}" 2>&1 &
	echo $! >"${PID_FILE}"
	log "operator started (pid $!, namespace ${NAMESPACE}); log: ${LOG_FILE}"
	for _ in $(seq 300); do
		if curl --silent --fail --max-time 2 --noproxy '*' "http://${PROBE_ADDR}/readyz" >/dev/null 2>&1; then
			return 0
		fi
		operator_pid >/dev/null || {
			tail -n 20 "${LOG_FILE}" >&2
			die "the operator exited (log: ${LOG_FILE})"
		}
		sleep 0.2
	done
	tail -n 20 "${LOG_FILE}" >&2
	die "the operator is not ready after 60s (log: ${LOG_FILE})"
}

if [[ "${1:-}" == stop ]]; then
	# The demo namespace goes first, while the operator still runs to release the fleets (their
	# members, disks and reservations go with it): after a control plane restart kwok would leave
	# the old members not ready for good, as it only makes Pending Pods ready.
	if kubectl get --raw /readyz --request-timeout=3s >/dev/null 2>&1 &&
		kubectl get namespace "${NAMESPACE}" >/dev/null 2>&1; then
		log "deleting namespace ${NAMESPACE} (its fleets, disks and reservations)"
		kubectl delete namespace "${NAMESPACE}" --timeout=120s ||
			log "namespace ${NAMESPACE} not gone yet; it finishes on the next start"
	fi
	stop_operator
	# What deploy/ installed cluster-wide goes too: its reservation policy would refuse any other
	# operator run on this control plane as someone other than the ServiceAccount (the tests').
	if kubectl get --raw /readyz --request-timeout=3s >/dev/null 2>&1; then
		kubectl delete --ignore-not-found -f "${ROOT}/deploy/rbac" >/dev/null || true
	fi
	"${ROOT}/cluster/down.sh"
	exit 0
elif (($#)); then
	sed -n '2,10s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
	exit 2
fi

[[ -x "${OPERATOR}" ]] || die "${OPERATOR} is missing: run make demo (it builds the operator first)"

# Only what the demo runs: the control plane's binaries, none of the tools the tests run.
log "control plane: cluster/build.sh --control-plane (the first time about 40 minutes of CPU), then cluster/up.sh"
"${ROOT}/cluster/build.sh" --control-plane
"${ROOT}/cluster/up.sh"

log "installing the CRDs, the operator's namespace, RBAC and admission policy (deploy/; the operator itself runs here, as a process, on its ServiceAccount's token)"
kubectl apply --server-side --force-conflicts -f "${ROOT}/deploy/crds" -f "${ROOT}/deploy/namespace.yaml" -f "${ROOT}/deploy/rbac" >/dev/null
# Polled rather than kubectl wait, which fails at once on a CRD whose status has no conditions yet.
established=""
for _ in $(seq 1 240); do
	established=$(kubectl get crd celldfleets.celld.io celldreservations.celld.io \
		-o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Established")].status}{" "}{end}' 2>/dev/null || true)
	[[ "${established}" == "True True " ]] && break
	sleep 0.25
done
[[ "${established}" == "True True " ]] || die "the CRDs were not established within 60 s: ${established}"

kubectl create namespace "${NAMESPACE}" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl label namespace "${NAMESPACE}" --overwrite pod-security.kubernetes.io/enforce=restricted >/dev/null

start_operator

log "applying deploy/samples to namespace ${NAMESPACE}"
# For a few seconds after the install the readiness default's admission policy answers 503
# ("Resource kind ... not found. There can be a delay ..."): the API server's policy loads a new
# CRD's schema every 5 to 10 s. Retried, as a person would, for at most a minute.
applied=""
for _ in $(seq 1 30); do
	if out=$(kubectl apply --namespace "${NAMESPACE}" -f "${ROOT}/deploy/samples" 2>&1); then
		applied=1
		break
	fi
	grep -q "There can be a delay" <<<"${out}" || die "applying deploy/samples: ${out}"
	sleep 2
done
[[ -n "${applied}" ]] || die "applying deploy/samples: the API server still answered 503 after a minute: ${out}"
echo "${out}"

log "watching the fleets converge (until every one is Steady and Ready, at most ${WATCH_TIMEOUT}s)"
kubectl get celldfleets --namespace "${NAMESPACE}" --watch &
watch_pid=$!
converged=0
if kubectl wait --namespace "${NAMESPACE}" --for=jsonpath='{.status.state}'=Steady celldfleet --all --timeout="${WATCH_TIMEOUT}s" >/dev/null &&
	kubectl wait --namespace "${NAMESPACE}" --for=condition=Ready celldfleet --all --timeout="${WATCH_TIMEOUT}s" >/dev/null; then
	converged=1
fi
sleep 1 # let the watch print the last row before it is stopped
kill "${watch_pid}" 2>/dev/null || true
wait "${watch_pid}" 2>/dev/null || true
if ((!converged)); then
	kubectl get celldfleets --namespace "${NAMESPACE}" -o wide
	die "the samples did not converge within ${WATCH_TIMEOUT}s (operator log: ${LOG_FILE})"
fi

# metrics-server needs two scrapes of a new member (10s apart) before it serves a CPU rate.
log "kubectl top pods: the members' usage as the metrics API serves it (kwok reports what each Pod's kwok.x-k8s.io/usage-cpu and usage-memory annotations say)"
members=$(kubectl get pods --namespace "${NAMESPACE}" --no-headers 2>/dev/null | wc -l)
deadline=$((SECONDS + 120))
until top=$(kubectl top pods --namespace "${NAMESPACE}" 2>/dev/null) && (($(wc -l <<<"${top}") > members)); do
	((SECONDS < deadline)) || die "kubectl top pods did not show the ${members} members within 120s (metrics-server log: ${CLUSTER_RUN}/logs/metrics-server.log)"
	sleep 2
done
echo "${top}"

cat <<EOF

[demo] both samples are Steady. Drive them from another shell:

  . cluster/env.sh        # KUBECONFIG=${KUBECONFIG} and kubectl on PATH
  kubectl -n ${NAMESPACE} get celldfleets -o wide -w

  # grow in one step; scale in one member per step, once spec.capacity.scaleInStabilization (5m) has passed
  kubectl -n ${NAMESPACE} scale celldfleet bucket-fleet --replicas=6
  kubectl -n ${NAMESPACE} scale celldfleet persistent-fleet --replicas=2
  kubectl -n ${NAMESPACE} get pods,pvc,celldreservations
  kubectl -n ${NAMESPACE} describe celldfleet persistent-fleet

  # usage: kwok reports what a Pod's annotations say, metrics-server serves it (kubectl top, the HPA),
  # and in capacity mode Recommend or Auto the operator sizes the fleet on it (CapacityObserved says how)
  kubectl -n ${NAMESPACE} annotate pod -l app.kubernetes.io/instance=bucket-fleet --overwrite kwok.x-k8s.io/usage-cpu=90m
  kubectl -n ${NAMESPACE} top pods
  kubectl -n ${NAMESPACE} patch celldfleet bucket-fleet --type=merge -p '{"spec":{"capacity":{"mode":"Recommend"}}}'
  kubectl -n ${NAMESPACE} get celldfleet bucket-fleet -o jsonpath='{.status.recommendedMembers}'

  # a node stops answering: after spec.healing.unreachableGracePeriod (5m) its fleets say
  # Degraded=MemberUnreachable and how to fence it; nothing is forced away until then
  # (docs/node-failure.md). 'ready' brings it back; fencing it replaces its members at once:
  cluster/node.sh not-ready kwok-node-01
  kubectl taint node kwok-node-01 node.kubernetes.io/out-of-service=nodeshutdown:NoExecute

  # delete a fleet: its members go, then its disks; the reservation of its bucket stays
  kubectl -n ${NAMESPACE} delete celldfleet persistent-fleet

  # the operator's metrics and log
  curl -s http://${METRICS_ADDR}/metrics | grep '^celld_operator_'
  tail -f ${LOG_FILE}

Stop everything with: make demo-stop
EOF
