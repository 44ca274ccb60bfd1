#!/usr/bin/env bash
# The real-node mode of the local control plane: the control plane of up.sh (its own state under
# .cache/cluster/real and its own ports, so it runs beside the kwok one), and REAL_NODES (3)
# nodes on this machine, each a kubelet and a containerd of its own, with its own state, cgroup
# root, address and Pod subnet, so that Pods run as real containers on real disks. A cluster DNS
# (CoreDNS), kube-proxy and kube-router's NetworkPolicy controller serve every node; rancher's
# local-path-provisioner gives claims real directories under each node's disk folder, and
# deletes them (local-path, the default class).
# Beside it, a CSI path whose volumes grow: Kubernetes' external-provisioner and external-resizer
# beside one controller of cmd/celld-csi, the stand-in driver, and on every node that driver's
# node plugin, registered with its kubelet. Class celld-csi-expandable (xfs) grows online;
# celld-csi-ext4 grows its filesystem only when the volume is mounted again.
#
#   cluster/real.sh up                  # build what is missing, start everything, print the kubeconfig
#   cluster/real.sh down [--purge]      # stop everything (--purge: and delete the state)
#   cluster/real.sh stop-node N         # power node N off: its kubelet, runtime and every container
#   cluster/real.sh start-node N        # power it on again
#   cluster/real.sh import FILE...      # import image archives (docker or named OCI) into every node
#   cluster/real.sh import-oci REPO FILE...  # import OCI archives tagged by version alone as REPO:TAG
#   cluster/real.sh node-dir N          # print node N's state folder (its disks are under disks/)
#
# Needs root (network, cgroups, mounts) and the packages of cluster/prereqs.sh, which up installs
# with apt-get when they are missing (iptables, conntrack, busybox-static, ...). The nodes
# share this machine's network namespace: they are told apart by address, ports and cgroup root,
# and one kube-proxy programs the Services for all of them.
set -euo pipefail
shopt -s inherit_errexit

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The kwok mode's exported ports must not leak in: the real mode has its own.
unset ETCD_CLIENT_PORT ETCD_PEER_PORT APISERVER_PORT CONTROLLER_MANAGER_PORT SCHEDULER_PORT CLUSTER_RUN KUBECONFIG
export CLUSTER_MODE=real
# shellcheck source=SCRIPTDIR/env.sh
. "${HERE}/env.sh"
# shellcheck source=SCRIPTDIR/lib.sh
. "${HERE}/lib.sh"
# shellcheck source=SCRIPTDIR/prereqs.sh
. "${HERE}/prereqs.sh"

REAL_IFACE="${REAL_IFACE:-celld-real}"
SANDBOX_IMAGE="registry.k8s.io/pause:${PAUSE_VERSION}"
HELPER_IMAGE="celld.local/busybox:${PAUSE_VERSION}"
# Short: containerd's socket paths must fit in a sockaddr_un.
SOCK_ROOT="/run/celld-real"
IMAGES_DIR="${CLUSTER_RUN}/images"
CSI_DRIVER="csi.celld.io"
CSI_CLASS="celld-csi-expandable"
CSI_RESTART_CLASS="celld-csi-ext4"
# Every node's volume files, one folder per node: the stand-in driver's "cloud" (cmd/celld-csi).
CSI_VOLUMES="${CLUSTER_RUN}/csi-volumes"
CSI_CONTROLLER_SOCK="${SOCK_ROOT}/csi-controller.sock"
CURL=(curl --silent --show-error --fail --max-time 2 --noproxy '*')

node_name() { printf 'real-node-%d' "$1"; }
node_ip() { echo "${REAL_NODE_PREFIX}$1"; }
node_dir() { echo "${CLUSTER_RUN}/nodes/$1"; }
node_sock() { echo "${SOCK_ROOT}/n$1/containerd.sock"; }
node_cgroup() { echo "celld-$(node_name "$1")"; }
node_csi_sock() { echo "${SOCK_ROOT}/n$1/csi.sock"; }
zone_of() {
	local zones=(zone-a zone-b zone-c)
	echo "${zones[$((($1 - 1) % 3))]}"
}

# --- host network --------------------------------------------------------------------------------

setup_host_network() {
	local i
	if ! ip link show "${REAL_IFACE}" >/dev/null 2>&1; then
		ip link add "${REAL_IFACE}" type bridge
	fi
	ip link set "${REAL_IFACE}" up
	ip addr replace "${REAL_HOST_IP}/32" dev "${REAL_IFACE}"
	for ((i = 1; i <= REAL_NODES; i++)); do
		ip addr replace "$(node_ip "${i}")/32" dev "${REAL_IFACE}"
	done
	sysctl -qw net.ipv4.ip_forward=1
	# Pods of one node reach each other through a Service only when bridged traffic meets
	# kube-proxy's rules.
	sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
}

# --- certificates ----------------------------------------------------------------------------------

# A client certificate signed by the cluster CA, and a kubeconfig for it, unless they exist.
client_kubeconfig() {
	local name=$1 subject=$2 file="${CLUSTER_RUN}/$1.kubeconfig"
	[[ -f "${file}" ]] && return 0
	openssl genrsa -out "${PKI_DIR}/${name}.key" 2048 2>/dev/null
	openssl req -new -key "${PKI_DIR}/${name}.key" -subj "${subject}" -out "${PKI_DIR}/${name}.csr" 2>/dev/null
	printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' >"${PKI_DIR}/${name}.ext"
	openssl x509 -req -in "${PKI_DIR}/${name}.csr" -CA "${PKI_DIR}/ca.crt" -CAkey "${PKI_DIR}/ca.key" \
		-CAcreateserial -days 3650 -sha256 -extfile "${PKI_DIR}/${name}.ext" -out "${PKI_DIR}/${name}.crt" 2>/dev/null
	rm -f "${PKI_DIR}/${name}.csr" "${PKI_DIR}/${name}.ext"
	cat >"${file}.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: celld-real
  cluster:
    server: https://${REAL_HOST_IP}:${APISERVER_PORT}
    certificate-authority-data: $(base64 -w0 "${PKI_DIR}/ca.crt")
users:
- name: ${name}
  user:
    client-certificate-data: $(base64 -w0 "${PKI_DIR}/${name}.crt")
    client-key-data: $(base64 -w0 "${PKI_DIR}/${name}.key")
contexts:
- name: celld-real
  context: {cluster: celld-real, user: ${name}}
current-context: celld-real
EOF
	chmod 600 "${file}.tmp"
	mv -f "${file}.tmp" "${file}"
}

# --- processes -------------------------------------------------------------------------------------

# Starts $1 (a name for its pid file and log) as "$2 args..." in a session of its own, unless
# its pid file names a live process.
start_process() {
	local name=$1 file pid
	shift
	file=$(pid_file "${name}")
	if [[ -f "${file}" ]] && pid=$(<"${file}") && kill -0 "${pid}" 2>/dev/null; then
		return 0
	fi
	rm -f "${file}"
	printf '=== %s starting %s\n' "$(date -u +%FT%TZ)" "${name}" >>"${LOG_DIR}/${name}.log"
	(
		# shellcheck disable=SC2016 # expanded by the inner shell
		exec setsid bash -c 'echo "$$" >"$0.tmp" && mv "$0.tmp" "$0" && exec "$@"' \
			"${file}" "$@" </dev/null >>"${LOG_DIR}/${name}.log" 2>&1
	) &
	local start=${SECONDS}
	until [[ -f "${file}" ]]; do
		((SECONDS - start < 10)) || die "${name} did not start (log: ${LOG_DIR}/${name}.log)"
		sleep 0.05
	done
}

# Stops the process of pid file $1: TERM, then KILL ($2 = KILL kills at once).
stop_process() {
	local name=$1 signal=${2:-TERM} file pid deadline
	file=$(pid_file "${name}")
	[[ -f "${file}" ]] || return 0
	pid=$(<"${file}")
	if kill -0 "${pid}" 2>/dev/null; then
		kill "-${signal}" "${pid}" 2>/dev/null || true
		deadline=$((SECONDS + ${STOP_TIMEOUT:-15}))
		while kill -0 "${pid}" 2>/dev/null; do
			if ((SECONDS >= deadline)); then
				kill -KILL "${pid}" 2>/dev/null || true
			fi
			sleep 0.1
		done
	fi
	rm -f "${file}"
}

# Waits until "$3..." succeeds, or fails once the process of pid file $2 has exited.
wait_for() {
	local what=$1 name=$2 deadline=$((SECONDS + ${UP_TIMEOUT:-120}))
	shift 2
	until "$@" >/dev/null 2>&1; do
		if ! kill -0 "$(cat "$(pid_file "${name}")" 2>/dev/null)" 2>/dev/null; then
			log_tail "${name}"
			die "${what} exited (log: ${LOG_DIR}/${name}.log)"
		fi
		((SECONDS < deadline)) || {
			log_tail "${name}"
			die "timed out waiting for ${what}"
		}
		sleep 0.3
	done
}

# --- cluster DNS -----------------------------------------------------------------------------------

start_coredns() {
	client_kubeconfig coredns "/O=system:masters/CN=coredns"
	cat >"${CLUSTER_RUN}/Corefile" <<EOF
.:53 {
    bind ${REAL_HOST_IP}
    errors
    health ${REAL_HOST_IP}:28080
    ready ${REAL_HOST_IP}:28181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig ${CLUSTER_RUN}/coredns.kubeconfig celld-real
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }
    cache 5
    loadbalance
}
EOF
	start_process coredns "${CLUSTER_BIN}/coredns" -conf "${CLUSTER_RUN}/Corefile"
	wait_for "CoreDNS" coredns "${CURL[@]}" "http://${REAL_HOST_IP}:28181/ready"
}

# --- nodes -----------------------------------------------------------------------------------------

write_node_config() {
	local i=$1 dir name ip
	dir=$(node_dir "${i}")
	name=$(node_name "${i}")
	ip=$(node_ip "${i}")
	mkdir -p "${dir}"/{containerd,kubelet,pods-logs,cni/conf,cni/ipam,disks} "$(dirname "$(node_sock "${i}")")"
	client_kubeconfig "${name}" "/O=system:nodes/CN=system:node:${name}"
	cat >"${dir}/containerd.toml" <<EOF
version = 3
root = "${dir}/containerd/root"
state = "${SOCK_ROOT}/n${i}/state"
disabled_plugins = ["io.containerd.nri.v1.nri"]

[grpc]
  address = "$(node_sock "${i}")"

[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "${SANDBOX_IMAGE}"

# This machine grants no CAP_SYS_RESOURCE, so no process may lower its OOM score below its
# parent's: the kubelet's -998 for a sandbox would fail every Pod. Kept at containerd's own.
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true

[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ["${CLUSTER_BIN}/cni"]
  conf_dir = "${dir}/cni/conf"

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  BinaryName = "${CLUSTER_BIN}/runc"
  SystemdCgroup = false

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "${ip}"
  stream_server_port = "0"
EOF
	cat >"${dir}/cni/conf/10-celld.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "celld-n${i}",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "celld-br${i}",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "${dir}/cni/ipam",
        "ranges": [[{"subnet": "${REAL_POD_PREFIX}.${i}.0/24"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
EOF
	: >"${dir}/resolv.conf"
	cat >"${dir}/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: ${ip}
port: 10250
readOnlyPort: 0
healthzBindAddress: ${ip}
healthzPort: 10248
containerRuntimeEndpoint: unix://$(node_sock "${i}")
cgroupDriver: cgroupfs
cgroupRoot: /$(node_cgroup "${i}")
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
podLogsDir: ${dir}/pods-logs
clusterDNS: [${REAL_HOST_IP}]
clusterDomain: cluster.local
resolvConf: ${dir}/resolv.conf
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: ${PKI_DIR}/ca.crt}
authorization: {mode: AlwaysAllow}
# The machine's disk is shared by every node and by the builds: evict on nothing but the end
# of it, and never collect images, which no registry can give back here.
evictionHard: {nodefs.available: "1%", imagefs.available: "1%", memory.available: "100Mi"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
nodeStatusUpdateFrequency: 5s
nodeStatusReportFrequency: 10s
serializeImagePulls: false
maxPods: 60
EOF
}

# Makes node $1's cgroup root in every v1 hierarchy, which the kubelet wants to find there; a
# new cpuset takes its parent's CPUs and memory nodes, or nothing could run in it.
ensure_cgroup() {
	local cg h
	cg=$(node_cgroup "$1")
	for h in /sys/fs/cgroup/*/; do
		h=${h%/}
		[[ "${h}" == */unified ]] && continue
		mkdir -p "${h}/${cg}"
		if [[ "${h}" == */cpuset ]]; then
			[[ -s "${h}/${cg}/cpuset.cpus" && "$(<"${h}/${cg}/cpuset.cpus")" != "" ]] || cat "${h}/cpuset.cpus" >"${h}/${cg}/cpuset.cpus"
			[[ -s "${h}/${cg}/cpuset.mems" && "$(<"${h}/${cg}/cpuset.mems")" != "" ]] || cat "${h}/cpuset.mems" >"${h}/${cg}/cpuset.mems"
		fi
	done
}

start_node() {
	local i=$1 dir name
	dir=$(node_dir "${i}")
	name=$(node_name "${i}")
	write_node_config "${i}"
	ensure_cgroup "${i}"
	if ! kill -0 "$(cat "$(pid_file "containerd-${i}")" 2>/dev/null)" 2>/dev/null; then
		# A node that starts again starts as after a reboot: /run is empty. A runtime state
		# left by a killed containerd names shims and mounts that are gone.
		unmount_under "${SOCK_ROOT}/n${i}/state"
		rm -rf "${SOCK_ROOT}/n${i}/state"
	fi
	start_process "containerd-${i}" "${CLUSTER_BIN}/containerd" --config "${dir}/containerd.toml"
	wait_for "containerd of ${name}" "containerd-${i}" "${CLUSTER_BIN}/ctr" --address "$(node_sock "${i}")" version
	import_images "${i}"
	start_csi_node "${i}"
	start_process "kubelet-${i}" "${CLUSTER_BIN}/kubelet" \
		--config="${dir}/kubelet.yaml" \
		--kubeconfig="${CLUSTER_RUN}/${name}.kubeconfig" \
		--root-dir="${dir}/kubelet" \
		--cert-dir="${dir}/kubelet/pki" \
		--hostname-override="${name}" \
		--node-ip="$(node_ip "${i}")" \
		--node-labels="topology.kubernetes.io/zone=$(zone_of "${i}"),celld.io/real-node=true"
}

# Unmounts everything mounted under folder $1, deepest first.
unmount_under() {
	local m
	awk -v p="$1/" 'index($2, p) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do
		umount -l "${m}" 2>/dev/null || true
	done
}

# Powers node $1 off as a machine would go: no process of it ends gracefully, and nothing of it
# runs afterwards. Its containers are whatever runs in its cgroup root, shims included.
stop_node() {
	local i=$1 sock pids cg
	stop_process "kubelet-${i}" KILL
	stop_process "csi-node-${i}" KILL
	stop_process "containerd-${i}" KILL
	sock=$(node_sock "${i}")
	pkill -KILL -f "containerd-shim-runc-v2 .*-address ${sock}( |$)" 2>/dev/null || true
	cg="/sys/fs/cgroup/pids/$(node_cgroup "${i}")"
	if [[ -d "${cg}" ]]; then
		# Freeze first, so no process forks away from the kill.
		pids=$(find "${cg}" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u)
		if [[ -n "${pids}" ]]; then
			# shellcheck disable=SC2086 # a list of pids
			kill -KILL ${pids} 2>/dev/null || true
		fi
	fi
	log "$(node_name "${i}") stopped"
}

# --- images ----------------------------------------------------------------------------------------

# The images every node holds from the start: the pause image (the sandbox) and a busybox for the
# provisioner's helper Pods, both built here without a container engine by hack/image.
build_base_images() {
	mkdir -p "${IMAGES_DIR}"
	local stamp="${IMAGES_DIR}/.base" want
	want="${PAUSE_VERSION} ${KUBE_VERSION} $(cat "${CLUSTER_ROOT}/hack/image/main.go" /bin/busybox 2>/dev/null | sha256sum)"
	if [[ -f "${stamp}" && "$(<"${stamp}")" == "${want}" ]]; then
		return 0
	fi
	[[ -x /bin/busybox ]] || die "/bin/busybox missing: install Debian's busybox-static"
	(cd "${CLUSTER_ROOT}" && go run ./hack/image -o "${IMAGES_DIR}/pause.tar" -ref "${SANDBOX_IMAGE}" \
		-entrypoint /pause -user 65535 "${CLUSTER_BIN}/pause=/pause")
	(cd "${CLUSTER_ROOT}" && go run ./hack/image -o "${IMAGES_DIR}/busybox.tar" -ref "${HELPER_IMAGE}" \
		-busybox /bin/busybox -entrypoint /bin/sh -user 0)
	echo "${want}" >"${stamp}"
}

# ctr on node $1's runtime, its output and cgroup v1 deprecation notice left out.
ctr() {
	local i=$1
	shift
	"${CLUSTER_BIN}/ctr" --address "$(node_sock "${i}")" -n k8s.io "$@" 2> >(grep -v 'DEPRECATION: The support for cgroup v1' >&2) >/dev/null
}

# Imports every archive of the images folder into node $1 (and the named files, when given). A
# node started again later finds them in its runtime's store.
import_images() {
	local i=$1 f
	shift
	for f in "${IMAGES_DIR}"/*.tar "$@"; do
		[[ -f "${f}" ]] || continue
		ctr "${i}" images import "${f}"
	done
}

# Imports OCI archives whose index names its image by tag alone (make release's) into node $1, as
# repository $2.
import_oci() {
	local i=$1 repo=$2 f
	shift 2
	for f in "$@"; do
		ctr "${i}" images import --base-name "${repo}" "${f}"
	done
}

# --- cluster objects -------------------------------------------------------------------------------

apply_cluster_objects() {
	local paths="" i
	for ((i = 1; i <= REAL_NODES; i++)); do
		paths+="{\"node\":\"$(node_name "${i}")\",\"paths\":[\"$(node_dir "${i}")/disks\"]},"
	done
	paths=${paths%,}
	kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata:
  name: local-path-storage
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: local-path-config
  namespace: local-path-storage
data:
  config.json: '{"nodePathMap":[${paths}]}'
  # A new disk is a root-owned folder that only root may write, as a freshly formatted volume
  # is: the members' write access must come from their Pod's fsGroup, as on a cloud disk.
  setup: |-
    #!/bin/sh
    set -eu
    mkdir -m 0755 -p "\$VOL_DIR"
  teardown: |-
    #!/bin/sh
    set -eu
    rm -rf "\$VOL_DIR"
  helperPod.yaml: |-
    apiVersion: v1
    kind: Pod
    metadata:
      name: helper-pod
    spec:
      priorityClassName: system-node-critical
      tolerations:
      - operator: Exists
      containers:
      - name: helper-pod
        image: ${HELPER_IMAGE}
        imagePullPolicy: Never
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: local-path
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
    defaultVolumeType: local
provisioner: rancher.io/local-path
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Delete
EOF
}

start_provisioner() {
	client_kubeconfig local-path-provisioner "/O=system:masters/CN=local-path-provisioner"
	start_process local-path-provisioner env KUBECONFIG="${CLUSTER_RUN}/local-path-provisioner.kubeconfig" \
		POD_NAMESPACE=local-path-storage \
		"${CLUSTER_BIN}/local-path-provisioner" --debug start \
		--namespace local-path-storage --config "${CLUSTER_RUN}/local-path-config.json" \
		--kubeconfig "${CLUSTER_RUN}/local-path-provisioner.kubeconfig" \
		--configmap-name local-path-config --service-account-name default \
		--helper-image "${HELPER_IMAGE}" --provisioner-name rancher.io/local-path
}

# --- the expandable CSI path ---------------------------------------------------------------------

# The stand-in driver is the project's own code: built on every up (the Go cache makes it quick),
# so the nodes never run an older one than the tree. A driver built anew replaces the running
# ones, which up then starts again: a cluster left up would otherwise keep the old one.
build_csi_driver() {
	local bin="${CLUSTER_BIN}/celld-csi" i
	(cd "${CLUSTER_ROOT}" && CGO_ENABLED=0 go build -trimpath -o "${bin}.tmp" ./cmd/celld-csi)
	if [[ -x "${bin}" ]] && cmp -s "${bin}" "${bin}.tmp"; then
		rm -f "${bin}.tmp"
		return 0
	fi
	mv -f "${bin}.tmp" "${bin}"
	stop_csi_controller
	for ((i = 1; i <= REAL_NODES; i++)); do
		stop_process "csi-node-${i}"
	done
}

# Node $1's plugin registers itself in its kubelet's plugins_registry folder, which the kubelet
# watches (a real deployment runs node-driver-registrar for that).
start_csi_node() {
	local i=$1
	mkdir -p "${CSI_VOLUMES}" "$(node_dir "${i}")/kubelet/plugins_registry"
	start_process "csi-node-${i}" "${CLUSTER_BIN}/celld-csi" -mode node -node-id "$(node_name "${i}")" \
		-endpoint "unix://$(node_csi_sock "${i}")" -volumes-dir "${CSI_VOLUMES}" \
		-registration-dir "$(node_dir "${i}")/kubelet/plugins_registry"
}

apply_csi_objects() {
	kubectl apply -f - >/dev/null <<EOF
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata:
  name: ${CSI_DRIVER}
spec:
  attachRequired: false
  podInfoOnMount: false
  # The kubelet gives the volume's files to the Pod's fsGroup, as on a cloud disk.
  fsGroupPolicy: File
  volumeLifecycleModes: [Persistent]
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: ${CSI_CLASS}
provisioner: ${CSI_DRIVER}
volumeBindingMode: WaitForFirstConsumer
allowVolumeExpansion: true
reclaimPolicy: Delete
parameters:
  csi.storage.k8s.io/fstype: xfs
---
# ext4, whose online growth this machine refuses (no CAP_SYS_RESOURCE): its filesystem grows when
# the volume is staged again, the class whose members must start again for it.
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: ${CSI_RESTART_CLASS}
provisioner: ${CSI_DRIVER}
volumeBindingMode: WaitForFirstConsumer
allowVolumeExpansion: true
reclaimPolicy: Delete
parameters:
  csi.storage.k8s.io/fstype: ext4
EOF
}

# The controller half: one controller of the driver, and Kubernetes' sidecars on its socket.
start_csi_controller() {
	client_kubeconfig csi-provisioner "/O=system:masters/CN=csi-provisioner"
	client_kubeconfig csi-resizer "/O=system:masters/CN=csi-resizer"
	mkdir -p "${CSI_VOLUMES}"
	start_process csi-controller "${CLUSTER_BIN}/celld-csi" -mode controller \
		-endpoint "unix://${CSI_CONTROLLER_SOCK}" -volumes-dir "${CSI_VOLUMES}"
	start_process csi-provisioner "${CLUSTER_BIN}/csi-provisioner" \
		--kubeconfig="${CLUSTER_RUN}/csi-provisioner.kubeconfig" --csi-address="${CSI_CONTROLLER_SOCK}" \
		--strict-topology --timeout=60s --leader-election=false
	start_process csi-resizer "${CLUSTER_BIN}/csi-resizer" \
		--kubeconfig="${CLUSTER_RUN}/csi-resizer.kubeconfig" --csi-address="${CSI_CONTROLLER_SOCK}" \
		--timeout=60s --leader-election=false
}

stop_csi_controller() {
	stop_process csi-resizer
	stop_process csi-provisioner
	stop_process csi-controller
}

# Detaches the loop devices of every volume file, once the nodes' mounts are gone.
detach_csi_volumes() {
	local dev file
	command -v losetup >/dev/null || return 0
	losetup --noheadings --output NAME,BACK-FILE 2>/dev/null | while read -r dev file; do
		if [[ "${file}" == "${CSI_VOLUMES}/"* ]]; then
			losetup -d "${dev}" 2>/dev/null || true
		fi
	done
}

start_kube_proxy() {
	client_kubeconfig kube-proxy "/CN=system:kube-proxy"
	start_process kube-proxy "${CLUSTER_BIN}/kube-proxy" \
		--kubeconfig="${CLUSTER_RUN}/kube-proxy.kubeconfig" \
		--hostname-override="$(node_name 1)" \
		--proxy-mode=iptables \
		--cluster-cidr="${REAL_POD_PREFIX}.0.0/16" \
		--bind-address="${REAL_HOST_IP}" \
		--healthz-bind-address="${REAL_HOST_IP}:28256" \
		--metrics-bind-address="${REAL_HOST_IP}:28249" \
		--conntrack-max-per-core=0
}

# The NetworkPolicy engine: kube-router's network policy controller, alone. The bridge CNI
# enforces no policy; kube-router programs iptables and ipsets for the policies, in the filter
# table's FORWARD chain (bridged traffic too: br_netfilter, physdev) and per Pod. The nodes share
# this network namespace, so one instance programs it, for every node's Pods
# (KUBE_ROUTER_ALL_NODES_LOCAL, cluster/patches/); the host's own traffic to a Pod (the kubelets'
# probes, the test's load client) is the node's and always allowed, as NetworkPolicy says.
start_kube_router() {
	client_kubeconfig kube-router "/O=system:masters/CN=kube-router"
	start_process kube-router env KUBE_ROUTER_ALL_NODES_LOCAL=true "${CLUSTER_BIN}/kube-router" \
		--kubeconfig="${CLUSTER_RUN}/kube-router.kubeconfig" \
		--hostname-override="$(node_name 1)" \
		--run-firewall=true --run-router=false --run-service-proxy=false --run-loadbalancer=false \
		--enable-cni=false --enable-ipv4=true --enable-ipv6=false \
		--service-cluster-ip-range="${SERVICE_CIDR:-10.96.0.0/16}" \
		--health-port=0 --metrics-port=0 --v=1
	local start=${SECONDS}
	until iptables -w -S KUBE-ROUTER-FORWARD >/dev/null 2>&1; do
		((SECONDS - start < 60)) || {
			log_tail kube-router
			die "kube-router did not program its chains"
		}
		sleep 0.5
	done
}

# Takes kube-router's chains and ipsets out: stopped, it leaves them in force.
stop_kube_router() {
	stop_process kube-router
	if [[ -x "${CLUSTER_BIN}/kube-router" ]] && iptables -w -S KUBE-ROUTER-FORWARD >/dev/null 2>&1; then
		"${CLUSTER_BIN}/kube-router" --cleanup-config >>"${LOG_DIR}/kube-router.log" 2>&1 || true
	fi
}

# --- main ------------------------------------------------------------------------------------------

up() {
	((EUID == 0)) || die "the real-node mode needs root (network, cgroups and mounts)"
	prereqs_ensure cluster/real.sh cluster real-build real-run
	"${HERE}/build.sh" --check etcd kube-apiserver kube-controller-manager kube-scheduler kubectl ||
		"${HERE}/build.sh" etcd kube-apiserver kube-controller-manager kube-scheduler kubectl
	"${HERE}/build-real.sh" --check || "${HERE}/build-real.sh"
	local start=${SECONDS} i
	setup_host_network
	"${HERE}/up.sh" >/dev/null
	mkdir -p "${LOG_DIR}" "${PID_DIR}"
	build_base_images
	build_csi_driver
	apply_cluster_objects
	apply_csi_objects
	kubectl get configmap -n local-path-storage local-path-config -o 'jsonpath={.data.config\.json}' \
		>"${CLUSTER_RUN}/local-path-config.json"
	start_coredns
	start_kube_proxy
	for ((i = 1; i <= REAL_NODES; i++)); do
		start_node "${i}"
	done
	start_provisioner
	start_csi_controller
	log "waiting for ${REAL_NODES} real nodes to be Ready"
	kubectl wait --for=condition=Ready node -l celld.io/real-node=true --timeout="${UP_TIMEOUT:-120}s" >/dev/null || {
		log_tail kubelet-1
		die "real nodes not Ready"
	}
	kubectl wait --for=create serviceaccount/default --namespace default --timeout=60s >/dev/null
	start_kube_router
	log "real nodes ready in $((SECONDS - start))s; export KUBECONFIG=${KUBECONFIG}"
	echo "${KUBECONFIG}"
}

down() {
	local i
	for ((i = REAL_NODES; i >= 1; i--)); do
		stop_node "${i}"
	done
	stop_process local-path-provisioner
	stop_kube_router
	stop_csi_controller
	stop_process kube-proxy
	stop_process coredns
	# Pod sandboxes leave their mounts behind when their runtime is killed.
	unmount_under "${CLUSTER_RUN}/nodes"
	unmount_under "${SOCK_ROOT}"
	detach_csi_volumes
	"${HERE}/down.sh" "$@"
	ip link del "${REAL_IFACE}" 2>/dev/null || true
	for ((i = 1; i <= REAL_NODES; i++)); do
		ip link del "celld-br${i}" 2>/dev/null || true
	done
	if [[ " $* " == *" --purge "* ]]; then
		rm -rf "${SOCK_ROOT}"
	fi
}

cmd=${1:-}
shift || true
case "${cmd}" in
up) up ;;
down) down "$@" ;;
stop-node) stop_node "${1:?node number}" ;;
start-node) start_node "${1:?node number}" ;;
import)
	for ((i = 1; i <= REAL_NODES; i++)); do
		import_images "${i}" "$@"
	done
	;;
import-oci)
	for ((i = 1; i <= REAL_NODES; i++)); do
		import_oci "${i}" "$@"
	done
	;;
node-dir) node_dir "${1:?node number}" ;;
*)
	sed -n '2,20s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
	[[ -z "${cmd}" || "${cmd}" == -h || "${cmd}" == --help ]] || exit 2
	;;
esac
