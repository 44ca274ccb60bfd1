#!/usr/bin/env bash
# The demo behind `make demo-real`: three real nodes on this machine (cluster/real.sh), the
# operator from its release image installed by its Helm chart, and both samples running as real
# celld containers, the PersistentFleet on real disks. Needs root.
#
#   hack/demo-real.sh          # build what is missing, start everything, apply the samples
#   hack/demo-real.sh stop     # delete the demo namespace, uninstall the operator, stop the nodes
set -euo pipefail
shopt -s inherit_errexit

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
unset ETCD_CLIENT_PORT ETCD_PEER_PORT APISERVER_PORT CONTROLLER_MANAGER_PORT SCHEDULER_PORT CLUSTER_RUN KUBECONFIG
export CLUSTER_MODE=real
# shellcheck source=SCRIPTDIR/../cluster/env.sh
. "${ROOT}/cluster/env.sh"

NAMESPACE="${DEMO_NAMESPACE:-celld-demo}"
VERSION="v0.0.0-demo"
DEMO_DIR="${ROOT}/.cache/demo-real"
IMAGE="celld.local/celld:demo"
WATCH_TIMEOUT="${DEMO_WATCH_TIMEOUT:-240}"

log() { printf '[demo-real] %s\n' "$*"; }

BUCKET_ADDR="${REAL_HOST_IP}:${DEMO_BUCKET_PORT:-28901}"
BUCKET_PID="${DEMO_DIR}/celld-bucket.pid"

stop_bucket() {
	if [[ -f "${BUCKET_PID}" ]]; then
		kill "$(<"${BUCKET_PID}")" 2>/dev/null || true
		rm -f "${BUCKET_PID}"
	fi
}

# shellcheck source=SCRIPTDIR/../cluster/prereqs.sh
. "${ROOT}/cluster/prereqs.sh"
# Before anything is built: what it needs, root and the packages of cluster/prereqs.sh.
((EUID == 0)) || {
	log "error: make demo-real needs root (network, cgroups and mounts): run it as root"
	exit 1
}

if [[ "${1:-}" == stop ]]; then
	if kubectl get --raw /readyz >/dev/null 2>&1; then
		kubectl delete namespace "${NAMESPACE}" --ignore-not-found --wait=true --timeout=120s || true
		helm uninstall celld-operator --namespace celld-system --wait >/dev/null 2>&1 || true
	fi
	stop_bucket
	"${ROOT}/cluster/real.sh" down
	exit 0
fi

prereqs_ensure 'make demo-real' cluster real-build real-run
"${ROOT}/cluster/build.sh" kubectl
"${ROOT}/cluster/tools.sh" helm cyclonedx-gomod
"${ROOT}/cluster/real.sh" up >/dev/null
mkdir -p "${DEMO_DIR}"

log "building the celld stand-in's image (${IMAGE}) and the operator's release ${VERSION}"
(cd "${ROOT}" && CGO_ENABLED=0 go build -trimpath -o "${DEMO_DIR}/celld" ./cmd/celld)
(cd "${ROOT}" && go run ./hack/image -o "${DEMO_DIR}/celld.tar" -ref "${IMAGE}" -entrypoint /celld \
	-user 65532:65532 "${DEMO_DIR}/celld=/celld")
(cd "${ROOT}" && go run ./hack/release -version "${VERSION}" -out "${DEMO_DIR}/release" >/dev/null)
# The Bucket sample's bucket: celld-bucket, a folder served over HTTP, stands in for the store.
(cd "${ROOT}" && CGO_ENABLED=0 go build -o "${DEMO_DIR}/celld-bucket" ./cmd/celld-bucket)
stop_bucket
setsid "${DEMO_DIR}/celld-bucket" --dir "${DEMO_DIR}/buckets" --listen "${BUCKET_ADDR}" \
	</dev/null >>"${DEMO_DIR}/celld-bucket.log" 2>&1 &
echo $! >"${BUCKET_PID}"
"${ROOT}/cluster/real.sh" import "${DEMO_DIR}/celld.tar"
"${ROOT}/cluster/real.sh" import-oci ghcr.io/celld/celld-operator "${DEMO_DIR}/release/celld-operator-${VERSION}.oci.tar"

log "installing the operator with Helm into celld-system (restricted Pod Security Standard)"
kubectl apply --server-side --force-conflicts -f "${DEMO_DIR}/release/celld-operator-crds.yaml" >/dev/null
for ns in celld-system "${NAMESPACE}"; do
	kubectl create namespace "${ns}" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
	kubectl label --overwrite namespace "${ns}" pod-security.kubernetes.io/enforce=restricted >/dev/null
done
helm upgrade --install celld-operator "${DEMO_DIR}/release/celld-operator-${VERSION#v}.tgz" \
	--namespace celld-system --set image.pullPolicy=Never --wait --timeout 4m >/dev/null

log "applying the samples with the stand-in's image, the local-path disks and celld-bucket's endpoint"
for sample in persistent-fleet bucket-fleet; do
	sed -e "s#image: .*#image: ${IMAGE}#" -e 's#storageClassName: kwok-volume#storageClassName: local-path#' \
		-e "s#^\(    region: .*\)#\1\n    endpoint: http://${BUCKET_ADDR}#" \
		"${ROOT}/deploy/samples/${sample}.yaml" | kubectl apply --namespace "${NAMESPACE}" -f - >/dev/null
done

log "watching the fleets converge (at most ${WATCH_TIMEOUT}s)"
deadline=$((SECONDS + WATCH_TIMEOUT))
until [[ "$(kubectl get celldfleets -n "${NAMESPACE}" -o 'jsonpath={range .items[*]}{.status.state}{" "}{end}')" == "Steady Steady " ]]; do
	((SECONDS < deadline)) || {
		kubectl get celldfleets,pods -n "${NAMESPACE}" -o wide
		log "error: the samples are not Steady after ${WATCH_TIMEOUT}s"
		exit 1
	}
	sleep 2
done
kubectl get celldfleets -n "${NAMESPACE}"
kubectl get pods -n "${NAMESPACE}" -o wide
kubectl get pods -n celld-system -o wide
cat <<EOF

[demo-real] both samples run on real nodes. From another shell:
  export KUBECONFIG=${KUBECONFIG}
  kubectl get pods -n ${NAMESPACE} -o wide    # one member per node
  ls ${CLUSTER_RUN}/nodes/*/disks    # the PersistentFleet's disks
  cluster/real.sh stop-node 2    # power a node off
  make demo-real-stop
EOF
