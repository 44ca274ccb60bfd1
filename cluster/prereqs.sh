# shellcheck shell=bash
# shellcheck disable=SC2034 # the lists are read by name in prereqs_missing
# The system packages the commands need, in one list that .ci/run and the scripts share. Sourced,
# not run:
#
#   . cluster/prereqs.sh
#   prereqs_ensure [--sudo] WHO GROUP...   # install what is missing, or fail with one line
#   prereqs_missing GROUP...               # print the Debian packages missing, one a line
#
# GROUP is any of: cluster (the local control plane: make demo, make cluster), real-build
# (cluster/build-real.sh), real-run (cluster/real.sh), release (the release image's base).
# prereqs_ensure installs what is missing with apt-get when it runs as root (with --sudo, through
# sudo otherwise); else it prints the one line that says what to install, and exits 1.
#
# Each entry is KIND:WHAT:PACKAGE: the Debian package PACKAGE gives command WHAT (KIND cmd, looked
# up on PATH), file WHAT, or library WHAT in this machine's multiarch folder (KIND lib).
# PREREQS_SYSROOT (default empty) is prefixed to every file and library checked, and
# PREREQS_DRY_RUN=1 prints the apt-get command instead of running it: a way to see what a bare
# machine would get without removing anything from this one.

PREREQS_cluster=(
	cmd:openssl:openssl # certificates (cluster/up.sh)
	cmd:curl:curl       # health checks
	cmd:jq:jq           # the pinned modules' metadata (cluster/build.sh)
	# the pinned modules' downloads
	file:/etc/ssl/certs/ca-certificates.crt:ca-certificates
)
PREREQS_real_build=(
	cmd:gcc:gcc                     # runc's nsenter, the pause program
	lib:libc.a:libc6-dev            # both linked statically
	lib:libseccomp.a:libseccomp-dev # runc with seccomp, linked statically
	cmd:pkg-config:pkg-config       # how runc's build finds libseccomp
)
PREREQS_real_run=(
	cmd:iptables:iptables            # kube-proxy, kube-router
	cmd:ipset:ipset                  # kube-router
	cmd:conntrack:conntrack          # kube-proxy
	cmd:ip:iproute2                  # the nodes' bridge and addresses
	cmd:sysctl:procps                # forwarding
	file:/bin/busybox:busybox-static # the disk provisioner's helper image
	cmd:losetup:util-linux           # the CSI stand-in's volumes are loop devices,
	cmd:blkid:util-linux             # ... whose filesystem it looks for before making one:
	cmd:mkfs.xfs:xfsprogs            # xfs by default, grown online by xfs_growfs,
	cmd:xfs_growfs:xfsprogs
	cmd:mkfs.ext4:e2fsprogs          # ext4 on request, grown by resize2fs
)
PREREQS_release=(
	# the release image's base carries the CA certificates
	file:/etc/ssl/certs/ca-certificates.crt:ca-certificates
)

# The multiarch library folder: /usr/lib/x86_64-linux-gnu on amd64.
_prereqs_libdir() {
	echo "/usr/lib/$(uname -m)-linux-gnu"
}

prereqs_missing() {
	local group entries entry kind what pkg seen=" "
	for group in "$@"; do
		case "${group}" in
		cluster | real-build | real-run | release) ;;
		*)
			echo "prereqs: unknown group ${group}" >&2
			return 2
			;;
		esac
		entries="PREREQS_${group//-/_}[@]"
		for entry in "${!entries}"; do
			kind=${entry%%:*}
			what=${entry#*:}
			pkg=${what##*:}
			what=${what%:*}
			case "${kind}" in
			cmd) if command -v "${what}" >/dev/null 2>&1; then continue; fi ;;
			file) if [[ -e "${PREREQS_SYSROOT:-}${what}" ]]; then continue; fi ;;
			lib) if [[ -e "${PREREQS_SYSROOT:-}$(_prereqs_libdir)/${what}" ]]; then continue; fi ;;
			esac
			if [[ "${seen}" != *" ${pkg} "* ]]; then
				seen+="${pkg} "
				echo "${pkg}"
			fi
		done
	done
}

prereqs_ensure() {
	local sudo_ok=0 who out missing=() run=()
	if [[ "${1:-}" == --sudo ]]; then
		sudo_ok=1
		shift
	fi
	who=$1
	shift
	out=$(prereqs_missing "$@") || exit 2
	[[ -n "${out}" ]] || return 0
	mapfile -t missing <<<"${out}"
	if ((EUID != 0)); then
		if ((sudo_ok)) && command -v sudo >/dev/null; then
			run=(sudo)
		else
			printf '%s: missing packages: run it as root to install them, or first: apt-get install %s\n' "${who}" "${missing[*]}" >&2
			exit 1
		fi
	fi
	if ! command -v apt-get >/dev/null; then
		printf '%s: missing commands or files; on Debian, as root: apt-get install %s\n' "${who}" "${missing[*]}" >&2
		exit 1
	fi
	if [[ "${PREREQS_DRY_RUN:-}" == 1 ]]; then
		run=(echo "${who}: would run:" "${run[@]}")
	fi
	echo "${who}: installing ${missing[*]}" >&2
	"${run[@]}" apt-get update -qq
	"${run[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
	if [[ "${PREREQS_DRY_RUN:-}" == 1 ]]; then
		return 0
	fi
	out=$(prereqs_missing "$@")
	if [[ -n "${out}" ]]; then
		printf '%s: still missing after apt-get install: %s\n' "${who}" "${out//$'\n'/ }" >&2
		exit 1
	fi
}
