#!/usr/bin/env bash
# Fails when a generated file is stale: regenerates everything with
# hack/update-codegen.sh in a temporary copy of the module and compares the
# copy's generated files with the working tree's. The working tree is never
# written to, and git is not used, so uncommitted files are checked as they are.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${ROOT}"

# Everything hack/update-codegen.sh writes.
GENERATED=(
	api/v1alpha1/zz_generated.deepcopy.go
	deploy/crds
	api/generated/clientset
	api/generated/listers
	api/generated/informers
)

TMP="$(mktemp -d)"
trap 'rm -rf "${TMP}"' EXIT
COPY="${TMP}/module"
mkdir -p "${COPY}"

# Snapshot of the module as it is on disk (committed or not), without VCS data,
# caches, build output or a leftover staging directory.
tar -c \
	--exclude=./.git --exclude=./.cache --exclude=./bin --exclude=./hack/_codegen \
	. | tar -x -C "${COPY}"

echo ">> regenerating in a temporary copy of the module"
if ! (cd "${COPY}" && hack/update-codegen.sh) >"${TMP}/update.log" 2>&1; then
	cat "${TMP}/update.log" >&2
	echo "verify-codegen: hack/update-codegen.sh failed (output above)" >&2
	exit 1
fi

# Every file under the generated paths, on either side.
list() {
	local base="$1" p
	for p in "${GENERATED[@]}"; do
		if [ -d "${base}/${p}" ]; then
			(cd "${base}" && find "${p}" -type f)
		elif [ -f "${base}/${p}" ]; then
			echo "${p}"
		fi
	done
}

stale=()
while read -r f; do
	[ -n "${f}" ] || continue
	if [ ! -f "${ROOT}/${f}" ]; then
		stale+=("${f} (missing: it would be generated)")
	elif [ ! -f "${COPY}/${f}" ]; then
		stale+=("${f} (no longer generated: delete it)")
	elif ! cmp -s "${ROOT}/${f}" "${COPY}/${f}"; then
		stale+=("${f} (out of date)")
		diff -u --label "${f} (working tree)" --label "${f} (regenerated)" \
			"${ROOT}/${f}" "${COPY}/${f}" \
			| head -n 40 >>"${TMP}/diff.txt" || true
	fi
done < <({ list "${ROOT}"; list "${COPY}"; } | LC_ALL=C sort -u)

if [ "${#stale[@]}" -gt 0 ]; then
	{
		echo
		echo "verify-codegen: FAILED: ${#stale[@]} generated file(s) are stale:"
		printf '  %s\n' "${stale[@]}"
		if [ -s "${TMP}/diff.txt" ]; then
			echo
			echo "First lines of each difference:"
			cat "${TMP}/diff.txt"
		fi
		echo
		echo "Run 'make generate' (that is, hack/update-codegen.sh) and commit the result."
	} >&2
	exit 1
fi

echo "verify-codegen: generated files are up to date."
