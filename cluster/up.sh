#!/usr/bin/env bash
# Starts the local control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok, metrics-server) on 127.0.0.1 with state under .cache/cluster/run, and
# creates the fake nodes. Idempotent: components already running are kept, and
# when all are healthy it only prints the kubeconfig path.
#
#   cluster/up.sh
#
# The last line printed (stdout) is the kubeconfig path. See cluster/README.md
# for the environment variables.
set -euo pipefail
shopt -s inherit_errexit

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/env.sh
. "${HERE}/env.sh"
# shellcheck source=SCRIPTDIR/lib.sh
. "${HERE}/lib.sh"
# shellcheck source=SCRIPTDIR/prereqs.sh
. "${HERE}/prereqs.sh"

SERVICE_CIDR="${SERVICE_CIDR:-10.96.0.0/16}"
KUBERNETES_SERVICE_IP="${KUBERNETES_SERVICE_IP:-10.96.0.1}"
POD_CIDR="${POD_CIDR:-10.0.0.0/16}"
NODE_LEASE_SECONDS="${NODE_LEASE_SECONDS:-20}"
NODE_MONITOR_GRACE_PERIOD="${NODE_MONITOR_GRACE_PERIOD:-20s}"
DEFAULT_TOLERATION_SECONDS="${DEFAULT_TOLERATION_SECONDS:-30}"
KCM_CONTROLLERS="${KCM_CONTROLLERS:-*}"
# The controllers' own client-side limit (--kube-api-qps, and twice that as the burst): empty
# keeps Kubernetes' default of 20 requests a second per controller, which paces the workload
# controllers when thousands of workloads are created at once. The bench's scale phase raises
# it (KCM_KUBE_API_QPS=200), so that the operator rather than the controllers is measured.
KCM_KUBE_API_QPS="${KCM_KUBE_API_QPS:-}"
UP_TIMEOUT="${UP_TIMEOUT:-120}"
# The HPA controller's sync period and scale-down stabilization, and the
# metrics-server's scrape interval (10s is the least it accepts): short, so
# that a test sees usage, and the HPA's answer to it, within seconds.
HPA_SYNC_PERIOD="${HPA_SYNC_PERIOD:-5s}"
HPA_DOWNSCALE_STABILIZATION="${HPA_DOWNSCALE_STABILIZATION:-15s}"
METRIC_RESOLUTION="${METRIC_RESOLUTION:-10s}"

ETCD_DATA="${CLUSTER_RUN}/etcd"
CURL=(curl --silent --show-error --fail --max-time 2 --noproxy '*')

up_start=${SECONDS}

# --- health checks ----------------------------------------------------------

healthy() {
	case "$1" in
	etcd) "${CURL[@]}" "http://127.0.0.1:${ETCD_CLIENT_PORT}/health" 2>/dev/null | grep -q '"health":"true"' ;;
	kube-apiserver) "${CURL[@]}" --cacert "${PKI_DIR}/ca.crt" "https://127.0.0.1:${APISERVER_PORT}/readyz" >/dev/null 2>&1 ;;
	kube-controller-manager) "${CURL[@]}" --insecure "https://127.0.0.1:${CONTROLLER_MANAGER_PORT}/healthz" >/dev/null 2>&1 ;;
	kube-scheduler) "${CURL[@]}" --insecure "https://127.0.0.1:${SCHEDULER_PORT}/healthz" >/dev/null 2>&1 ;;
	kwok) "${CURL[@]}" "http://127.0.0.1:${KWOK_PORT}/healthz" >/dev/null 2>&1 ;;
	metrics-server) "${CURL[@]}" --cacert "${PKI_DIR}/ca.crt" "https://127.0.0.1:${METRICS_SERVER_PORT}/livez" >/dev/null 2>&1 ;;
	esac
}

port_of() {
	case "$1" in
	etcd) echo "${ETCD_CLIENT_PORT}" ;;
	kube-apiserver) echo "${APISERVER_PORT}" ;;
	kube-controller-manager) echo "${CONTROLLER_MANAGER_PORT}" ;;
	kube-scheduler) echo "${SCHEDULER_PORT}" ;;
	kwok) echo "${KWOK_PORT}" ;;
	metrics-server) echo "${METRICS_SERVER_PORT}" ;;
	esac
}

port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

all_healthy() {
	local name
	for name in "${COMPONENTS[@]}"; do
		running_pid "${name}" >/dev/null && healthy "${name}" || return 1
	done
	[[ -f "${KUBECONFIG}" ]]
}

# Waits until component $1 is healthy; on failure prints its log tail.
wait_healthy() {
	local name=$1 pid deadline=$((SECONDS + UP_TIMEOUT))
	until healthy "${name}"; do
		if ! pid=$(running_pid "${name}"); then
			log_tail "${name}"
			die "${name} exited during startup (log: ${LOG_DIR}/${name}.log)"
		fi
		if ((SECONDS >= deadline)); then
			log_tail "${name}"
			die "${name} (pid ${pid}) not healthy after ${UP_TIMEOUT}s (log: ${LOG_DIR}/${name}.log)"
		fi
		sleep 0.2
	done
}

# --- audit -------------------------------------------------------------------

# The API server records who deleted each Pod, claim and lease, with the
# delete's options (grace period, preconditions), and who evicted each Pod (a
# drain's request, which the disruption budget may refuse), in logs/audit.log:
# the end-to-end tests tell the operator's deletes from a controller's, kwok's
# or a drain's by it.
write_audit_policy() {
	cat >"${CLUSTER_RUN}/audit-policy.yaml" <<'YAML'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Request
  verbs: [delete, deletecollection]
  resources:
  - group: ""
    resources: [pods, persistentvolumeclaims]
  - group: coordination.k8s.io
    resources: [leases]
- level: Request
  verbs: [create]
  resources:
  - group: ""
    resources: [pods/eviction]
- level: None
YAML
}

# --- certificates and kubeconfigs ------------------------------------------

# Creates a self-signed CA named $1 unless it exists.
make_ca() {
	local name=$1
	[[ -f "${PKI_DIR}/${name}.crt" ]] && return 0
	openssl genrsa -out "${PKI_DIR}/${name}.key" 2048 2>/dev/null
	openssl req -x509 -new -key "${PKI_DIR}/${name}.key" -subj "/CN=celld-local-${name}" \
		-days 3650 -sha256 -out "${PKI_DIR}/${name}.crt" \
		-addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,digitalSignature,keyCertSign,cRLSign" 2>/dev/null
}

# Issues a certificate unless it exists: CA name, cert name, subject, and for
# a serving certificate its subjectAltName list (else a client certificate).
issue_cert() {
	local ca=$1 name=$2 subject=$3 san=${4:-} ext
	[[ -f "${PKI_DIR}/${name}.crt" ]] && return 0
	openssl genrsa -out "${PKI_DIR}/${name}.key" 2048 2>/dev/null
	openssl req -new -key "${PKI_DIR}/${name}.key" -subj "${subject}" \
		-out "${PKI_DIR}/${name}.csr" 2>/dev/null
	ext="${PKI_DIR}/${name}.ext"
	{
		echo "basicConstraints=critical,CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		if [[ -n "${san}" ]]; then
			echo "extendedKeyUsage=serverAuth"
			echo "subjectAltName=${san}"
		else
			echo "extendedKeyUsage=clientAuth"
		fi
	} >"${ext}"
	openssl x509 -req -in "${PKI_DIR}/${name}.csr" -CA "${PKI_DIR}/${ca}.crt" \
		-CAkey "${PKI_DIR}/${ca}.key" -CAcreateserial -days 3650 -sha256 \
		-extfile "${ext}" -out "${PKI_DIR}/${name}.crt" 2>/dev/null
	rm -f "${PKI_DIR}/${name}.csr" "${ext}"
}

ensure_pki() {
	mkdir -p "${PKI_DIR}"
	chmod 700 "${PKI_DIR}"
	[[ -f "${PKI_DIR}/ca.crt" ]] || log "creating certificates in ${PKI_DIR}"
	make_ca ca
	issue_cert ca apiserver "/CN=kube-apiserver" \
		"IP:127.0.0.1,IP:${REAL_HOST_IP},IP:${KUBERNETES_SERVICE_IP},DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
	issue_cert ca admin "/O=system:masters/CN=celld-admin"
	issue_cert ca kube-controller-manager "/CN=system:kube-controller-manager"
	issue_cert ca kube-scheduler "/CN=system:kube-scheduler"
	issue_cert ca kwok "/O=system:masters/CN=kwok-controller"
	issue_cert ca metrics-server "/O=system:masters/CN=metrics-server"
	# Its serving certificate: the aggregator checks the name of the Service
	# the APIService points at.
	issue_cert ca metrics-server-serving "/CN=metrics-server" \
		"IP:127.0.0.1,DNS:localhost,DNS:metrics-server.kube-system.svc"
	# Request-header (front proxy) CA: lets kube-controller-manager and
	# kube-scheduler delegate authentication, and aggregated API servers work.
	make_ca front-proxy-ca
	issue_cert front-proxy-ca front-proxy-client "/CN=front-proxy-client"
	if [[ ! -f "${PKI_DIR}/sa.key" ]]; then
		openssl genrsa -out "${PKI_DIR}/sa.key" 2048 2>/dev/null
		openssl rsa -in "${PKI_DIR}/sa.key" -pubout -out "${PKI_DIR}/sa.pub" 2>/dev/null
	fi
}

# Writes a kubeconfig with embedded credentials: file, user (cert name).
write_kubeconfig() {
	local file=$1 user=$2 tmp
	tmp="${file}.tmp"
	cat >"${tmp}" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: celld-local
  cluster:
    server: https://127.0.0.1:${APISERVER_PORT}
    certificate-authority-data: $(base64 -w0 "${PKI_DIR}/ca.crt")
users:
- name: ${user}
  user:
    client-certificate-data: $(base64 -w0 "${PKI_DIR}/${user}.crt")
    client-key-data: $(base64 -w0 "${PKI_DIR}/${user}.key")
contexts:
- name: celld-local
  context:
    cluster: celld-local
    user: ${user}
current-context: celld-local
EOF
	chmod 600 "${tmp}"
	mv -f "${tmp}" "${file}"
}

ensure_kubeconfigs() {
	write_kubeconfig "${KUBECONFIG}" admin
	write_kubeconfig "${CLUSTER_RUN}/kube-controller-manager.kubeconfig" kube-controller-manager
	write_kubeconfig "${CLUSTER_RUN}/kube-scheduler.kubeconfig" kube-scheduler
	write_kubeconfig "${CLUSTER_RUN}/kwok.kubeconfig" kwok
	write_kubeconfig "${CLUSTER_RUN}/metrics-server.kubeconfig" metrics-server
}

# --- components --------------------------------------------------------------

args_of() {
	local kc
	case "$1" in
	etcd)
		ARGS=(
			--name=local
			--data-dir="${ETCD_DATA}"
			--listen-client-urls="http://127.0.0.1:${ETCD_CLIENT_PORT}"
			--advertise-client-urls="http://127.0.0.1:${ETCD_CLIENT_PORT}"
			--listen-peer-urls="http://127.0.0.1:${ETCD_PEER_PORT}"
			--initial-advertise-peer-urls="http://127.0.0.1:${ETCD_PEER_PORT}"
			--initial-cluster="local=http://127.0.0.1:${ETCD_PEER_PORT}"
			--unsafe-no-fsync
			--log-level=warn
		)
		;;
	kube-apiserver)
		ARGS=(
			--secure-port="${APISERVER_PORT}"
			--etcd-servers="http://127.0.0.1:${ETCD_CLIENT_PORT}"
			--service-cluster-ip-range="${SERVICE_CIDR}"
		)
		if [[ "${CLUSTER_MODE}" == real ]]; then
			# Pods reach it through the kubernetes Service, whose endpoint is the advertised
			# address, which must not be a loopback one.
			# Its kubelets' names resolve nowhere: logs, exec and metrics go to their addresses.
			ARGS+=(--advertise-address="${REAL_HOST_IP}" --bind-address=0.0.0.0 --kubelet-preferred-address-types=InternalIP \
				--kubelet-client-certificate="${PKI_DIR}/admin.crt" --kubelet-client-key="${PKI_DIR}/admin.key")
		else
			ARGS+=(--advertise-address=127.0.0.1 --bind-address=127.0.0.1 --endpoint-reconciler-type=none)
		fi
		ARGS+=(
			--tls-cert-file="${PKI_DIR}/apiserver.crt"
			--tls-private-key-file="${PKI_DIR}/apiserver.key"
			--client-ca-file="${PKI_DIR}/ca.crt"
			--requestheader-client-ca-file="${PKI_DIR}/front-proxy-ca.crt"
			--requestheader-allowed-names=front-proxy-client
			--requestheader-username-headers=X-Remote-User
			--requestheader-group-headers=X-Remote-Group
			--requestheader-extra-headers-prefix=X-Remote-Extra-
			--proxy-client-cert-file="${PKI_DIR}/front-proxy-client.crt"
			--proxy-client-key-file="${PKI_DIR}/front-proxy-client.key"
			--service-account-issuer=https://kubernetes.default.svc.cluster.local
			--service-account-key-file="${PKI_DIR}/sa.pub"
			--service-account-signing-key-file="${PKI_DIR}/sa.key"
			--authorization-mode="Node,RBAC"
			--allow-privileged=true
			--default-not-ready-toleration-seconds="${DEFAULT_TOLERATION_SECONDS}"
			--default-unreachable-toleration-seconds="${DEFAULT_TOLERATION_SECONDS}"
			--audit-policy-file="${CLUSTER_RUN}/audit-policy.yaml"
			--audit-log-path="${LOG_DIR}/audit.log"
			--audit-log-format=json
			--audit-log-maxsize=100
			--audit-log-maxbackup=1
		)
		;;
	kube-controller-manager)
		kc="${CLUSTER_RUN}/kube-controller-manager.kubeconfig"
		ARGS=(
			--kubeconfig="${kc}"
			--authentication-kubeconfig="${kc}"
			--authorization-kubeconfig="${kc}"
			--bind-address=127.0.0.1
			--secure-port="${CONTROLLER_MANAGER_PORT}"
			--cert-dir="${CLUSTER_RUN}/kube-controller-manager"
			--leader-elect=false
			--controllers="${KCM_CONTROLLERS}"
			--use-service-account-credentials=true
			--service-account-private-key-file="${PKI_DIR}/sa.key"
			--root-ca-file="${PKI_DIR}/ca.crt"
			--cluster-signing-cert-file="${PKI_DIR}/ca.crt"
			--cluster-signing-key-file="${PKI_DIR}/ca.key"
			--service-cluster-ip-range="${SERVICE_CIDR}"
			--node-monitor-period=2s
			--node-monitor-grace-period="${NODE_MONITOR_GRACE_PERIOD}"
			--horizontal-pod-autoscaler-sync-period="${HPA_SYNC_PERIOD}"
			--horizontal-pod-autoscaler-downscale-stabilization="${HPA_DOWNSCALE_STABILIZATION}"
		)
		if [[ -n "${KCM_KUBE_API_QPS}" ]]; then
			ARGS+=(--kube-api-qps="${KCM_KUBE_API_QPS}" --kube-api-burst="$((KCM_KUBE_API_QPS * 2))")
		fi
		;;
	kube-scheduler)
		kc="${CLUSTER_RUN}/kube-scheduler.kubeconfig"
		ARGS=(
			--kubeconfig="${kc}"
			--authentication-kubeconfig="${kc}"
			--authorization-kubeconfig="${kc}"
			--bind-address=127.0.0.1
			--secure-port="${SCHEDULER_PORT}"
			--cert-dir="${CLUSTER_RUN}/kube-scheduler"
			--leader-elect=false
		)
		;;
	kwok)
		local stages=() f
		for f in "${CLUSTER_STAGES}"/*.yaml; do
			# The StorageClass is applied to the cluster; kwok takes the stages.
			[[ "$(basename "${f}")" == storage-class.yaml ]] || stages+=("${f}")
		done
		ARGS=(
			--kubeconfig="${CLUSTER_RUN}/kwok.kubeconfig"
			--config="$(
				IFS=,
				echo "${stages[*]}"
			)"
			--manage-all-nodes=false
			--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake
			--node-lease-duration-seconds="${NODE_LEASE_SECONDS}"
			--cidr="${POD_CIDR}"
			--server-address="127.0.0.1:${KWOK_PORT}"
			--node-ip=127.0.0.1
			--node-port="${KWOK_PORT}"
		)
		;;
	metrics-server)
		kc="${CLUSTER_RUN}/metrics-server.kubeconfig"
		# kwok's kubelet endpoint serves a self-signed certificate, hence
		# --kubelet-insecure-tls.
		ARGS=(
			--kubeconfig="${kc}"
			--authentication-kubeconfig="${kc}"
			--authorization-kubeconfig="${kc}"
			--bind-address=127.0.0.1
			--secure-port="${METRICS_SERVER_PORT}"
			--tls-cert-file="${PKI_DIR}/metrics-server-serving.crt"
			--tls-private-key-file="${PKI_DIR}/metrics-server-serving.key"
			--cert-dir="${CLUSTER_RUN}/metrics-server"
			--kubelet-insecure-tls
			--kubelet-use-node-status-port
			--kubelet-preferred-address-types=InternalIP
			--kubelet-request-timeout=5s
			--metric-resolution="${METRIC_RESOLUTION}"
		)
		;;
	esac
}

start_component() {
	local name=$1 file start
	if running_pid "${name}" >/dev/null; then
		return 0
	fi
	if port_in_use "$(port_of "${name}")"; then
		die "port $(port_of "${name}") for ${name} is in use by another process (set the port variables, see cluster/README.md)"
	fi
	args_of "${name}"
	file=$(pid_file "${name}")
	rm -f "${file}"
	printf '=== %s starting %s\n' "$(date -u +%FT%TZ)" "${name}" >>"${LOG_DIR}/${name}.log"
	log "starting ${name}"
	# A new session keeps the process alive after this script and its
	# terminal exit; the wrapper records the PID that exec keeps.
	local env=()
	if [[ "${name}" == kwok ]]; then
		# kwok also reads $KWOK_WORKDIR/kwok.yaml (default ~/.kwok/kwok.yaml).
		env=(KWOK_WORKDIR="${CLUSTER_RUN}/kwok")
	fi
	(
		cd "${CLUSTER_RUN}"
		# shellcheck disable=SC2016 # expanded by the inner shell
		exec env "${env[@]}" setsid bash -c 'echo "$$" >"$0.tmp" && mv "$0.tmp" "$0" && exec "$@"' \
			"${file}" "${CLUSTER_BIN}/${name}" "${ARGS[@]}" \
			</dev/null >>"${LOG_DIR}/${name}.log" 2>&1
	) &
	start=${SECONDS}
	until [[ -f "${file}" ]]; do
		((SECONDS - start < 10)) || die "${name} did not start (log: ${LOG_DIR}/${name}.log)"
		sleep 0.05
	done
}

# --- cluster objects ---------------------------------------------------------

# Applies the fake nodes: NODES nodes kwok-node-01.. spread over zone-a/b/c.
apply_nodes() {
	local i name zones=(zone-a zone-b zone-c)
	for ((i = 1; i <= NODES; i++)); do
		printf -v name 'kwok-node-%02d' "${i}"
		cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: ${name}
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    type: kwok
    kubernetes.io/arch: amd64
    kubernetes.io/os: linux
    kubernetes.io/hostname: ${name}
    topology.kubernetes.io/zone: ${zones[$(((i - 1) % 3))]}
EOF
	done | kubectl apply -f - >/dev/null
	local status='{"status":{"capacity":{"cpu":"64","memory":"256Gi","pods":"1000"},"allocatable":{"cpu":"64","memory":"256Gi","pods":"1000"}}}'
	for ((i = 1; i <= NODES; i++)); do
		printf -v name 'kwok-node-%02d' "${i}"
		kubectl patch node "${name}" --subresource=status --type=merge -p "${status}" >/dev/null
	done
}

# Points metrics-server at the fake kubelets, once kwok has initialized the
# nodes (its first status write drops addresses written before it): every
# fake kubelet is kwok's server, on 127.0.0.1, and serves each node's
# resource metrics at the path the node's annotation names.
apply_kubelet_endpoints() {
	local i name status
	status="{\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"127.0.0.1\"}],\"daemonEndpoints\":{\"kubeletEndpoint\":{\"Port\":${KWOK_PORT}}}}}"
	for ((i = 1; i <= NODES; i++)); do
		printf -v name 'kwok-node-%02d' "${i}"
		kubectl annotate --overwrite node "${name}" \
			"metrics.k8s.io/resource-metrics-path=/metrics/nodes/${name}/metrics/resource" >/dev/null
		kubectl patch node "${name}" --subresource=status --type=merge -p "${status}" >/dev/null
	done
}

# Registers metrics-server, which runs outside the cluster, as the resource
# metrics API: an ExternalName Service lets the aggregator reach it on
# 127.0.0.1, and the APIService trusts the cluster CA that signed its
# serving certificate.
apply_metrics_api() {
	kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Service
metadata:
  name: metrics-server
  namespace: kube-system
  labels:
    k8s-app: metrics-server
spec:
  type: ExternalName
  externalName: 127.0.0.1
  ports:
  - name: https
    port: ${METRICS_SERVER_PORT}
    protocol: TCP
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1beta1.metrics.k8s.io
  labels:
    k8s-app: metrics-server
spec:
  group: metrics.k8s.io
  version: v1beta1
  groupPriorityMinimum: 100
  versionPriority: 100
  caBundle: $(base64 -w0 "${PKI_DIR}/ca.crt")
  service:
    name: metrics-server
    namespace: kube-system
    port: ${METRICS_SERVER_PORT}
EOF
}

# A restarted kwok has a new identity and waits for the leases held by the old
# one to expire; deleting the fake nodes' leases lets it take them at once.
release_node_leases() {
	local leases
	leases=$(kubectl get nodes -l type=kwok -o 'jsonpath={.items[*].metadata.name}')
	if [[ -n "${leases}" ]]; then
		# shellcheck disable=SC2086 # word splitting of node names is intended
		kubectl delete lease --namespace kube-node-lease --ignore-not-found --wait=false ${leases} >/dev/null
	fi
}

# --- main ----------------------------------------------------------------------

mkdir -p "${CLUSTER_RUN}"
if all_healthy; then
	log "already running and healthy"
	echo "${KUBECONFIG}"
	exit 0
fi
prereqs_ensure cluster/up.sh cluster

# What this mode starts, and kubectl: none of the tools the tests run (cluster/tools.sh).
needed=(--control-plane)
if [[ "${CLUSTER_MODE}" == real ]]; then
	needed=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl)
fi
if ! "${HERE}/build.sh" --check "${needed[@]}"; then
	log "binaries missing or out of date: running cluster/build.sh"
	"${HERE}/build.sh" "${needed[@]}"
fi

mkdir -p "${LOG_DIR}" "${PID_DIR}" "${CLUSTER_RUN}/kwok"
ensure_pki
write_audit_policy
ensure_kubeconfigs

start_component etcd
wait_healthy etcd
start_component kube-apiserver
wait_healthy kube-apiserver
log "API ready after $((SECONDS - up_start))s"

if [[ "${CLUSTER_MODE}" == real ]]; then
	# The nodes, their runtime, DNS and disks are cluster/real.sh's.
	start_component kube-controller-manager
	start_component kube-scheduler
	wait_healthy kube-controller-manager
	wait_healthy kube-scheduler
	log "control plane ready in $((SECONDS - up_start))s; export KUBECONFIG=${KUBECONFIG}"
	echo "${KUBECONFIG}"
	exit 0
fi

kubectl apply -f "${CLUSTER_STAGES}/storage-class.yaml" >/dev/null
apply_nodes

start_component kube-controller-manager
start_component kube-scheduler
if ! running_pid kwok >/dev/null; then
	release_node_leases
fi
start_component kwok
wait_healthy kube-controller-manager
wait_healthy kube-scheduler
wait_healthy kwok

log "waiting for ${NODES} nodes to be Ready and the default service account"
kubectl wait --for=condition=Ready node -l type=kwok --timeout="${UP_TIMEOUT}s" >/dev/null ||
	{
		log_tail kwok
		die "fake nodes not Ready"
	}
kubectl wait --for=create serviceaccount/default --namespace default --timeout="${UP_TIMEOUT}s" >/dev/null ||
	{
		log_tail kube-controller-manager
		die "default service account not created"
	}

apply_kubelet_endpoints
apply_metrics_api
start_component metrics-server
wait_healthy metrics-server
log "waiting for the metrics API (v1beta1.metrics.k8s.io) to be available"
kubectl wait --for=condition=Available apiservice/v1beta1.metrics.k8s.io --timeout="${UP_TIMEOUT}s" >/dev/null ||
	{
		log_tail metrics-server
		die "the metrics API is not available"
	}

log "ready in $((SECONDS - up_start))s; export KUBECONFIG=${KUBECONFIG}"
echo "${KUBECONFIG}"
