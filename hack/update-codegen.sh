#!/usr/bin/env bash
# Regenerates every generated file of the celld.io/v1alpha1 API:
#
#   api/v1alpha1/zz_generated.deepcopy.go   controller-gen object
#   deploy/crds/*.yaml                       controller-gen crd, then hack/crdversions
#   api/generated/clientset/versioned/...    client-gen     (k8s.io/code-generator)
#   api/generated/listers/...                lister-gen     (k8s.io/code-generator)
#   api/generated/informers/externalversions informer-gen   (k8s.io/code-generator)
#
# All generators are `tool` lines of go.mod, so their versions are pinned there
# and nothing but Go is needed. hack/verify-codegen.sh checks that the
# committed files are what this script produces.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${ROOT}"

MODULE="$(go list -m)"
BOILERPLATE="hack/boilerplate.go.txt"
API_DIR="api/v1alpha1"
GROUP_DIR="celld"          # first label of +groupName=celld.io
VERSION="v1alpha1"
OUT_DIR="api/generated"
OUT_PKG="${MODULE}/${OUT_DIR}"
# client-gen, lister-gen and informer-gen name their group directories after
# the directory above the version (here that would be "api", giving
# listers/api/v1alpha1). The types are therefore staged, for the duration of
# the run, at hack/_codegen/celld/v1alpha1 (a "_" directory: ./... patterns
# skip it), and the staged import path is rewritten to the real one afterwards.
STAGE_ROOT="hack/_codegen"
STAGE_PKG="${MODULE}/${STAGE_ROOT}/${GROUP_DIR}/${VERSION}"
API_PKG="${MODULE}/${API_DIR}"
GOFMT="$(go env GOROOT)/bin/gofmt"

TMP="$(mktemp -d)"
cleanup() {
	rm -rf "${ROOT:?}/${STAGE_ROOT}" "${TMP}"
}
trap cleanup EXIT

echo ">> deepcopy (controller-gen object)"
go tool controller-gen object paths=./api/v1alpha1/...

echo ">> CRDs (controller-gen crd) -> deploy/crds"
# Drop the CRDs controller-gen wrote before, so a removed type leaves no stale file.
for f in deploy/crds/*.yaml; do
	if [ -f "${f}" ] && grep -q 'controller-gen.kubebuilder.io/version' "${f}"; then
		rm -f "${f}"
	fi
done
go tool controller-gen crd:crdVersions=v1 paths=./api/v1alpha1/... output:crd:artifacts:config=deploy/crds
# Each CRD serves v1beta1 beside v1alpha1, with the same schema, and stores v1beta1.
go run ./hack/crdversions deploy/crds/celld.io_*.yaml

echo ">> clientset, listers, informers (k8s.io/code-generator) -> ${OUT_DIR}"
rm -rf "${STAGE_ROOT}"
mkdir -p "${STAGE_ROOT}/${GROUP_DIR}/${VERSION}"
for f in "${API_DIR}"/*.go; do
	case "${f}" in *_test.go) continue ;; esac
	cp "${f}" "${STAGE_ROOT}/${GROUP_DIR}/${VERSION}/"
done

GEN="${TMP}/generated"
mkdir -p "${GEN}"

go tool client-gen \
	--go-header-file "${BOILERPLATE}" \
	--output-dir "${GEN}/clientset" \
	--output-pkg "${OUT_PKG}/clientset" \
	--clientset-name versioned \
	--input-base "${MODULE}/${STAGE_ROOT}" \
	--input "${GROUP_DIR}/${VERSION}"

go tool lister-gen \
	--go-header-file "${BOILERPLATE}" \
	--output-dir "${GEN}/listers" \
	--output-pkg "${OUT_PKG}/listers" \
	"${STAGE_PKG}"

go tool informer-gen \
	--go-header-file "${BOILERPLATE}" \
	--output-dir "${GEN}/informers" \
	--output-pkg "${OUT_PKG}/informers" \
	--versioned-clientset-package "${OUT_PKG}/clientset/versioned" \
	--listers-package "${OUT_PKG}/listers" \
	"${STAGE_PKG}"

# Point the generated code at the real API package, then let gofmt re-sort imports.
find "${GEN}" -type f -name '*.go' | while read -r f; do
	if grep -q "${STAGE_PKG}" "${f}"; then
		sed "s#${STAGE_PKG}#${API_PKG}#g" "${f}" >"${f}.tmp"
		mv "${f}.tmp" "${f}"
	fi
done
"${GOFMT}" -w "${GEN}"
if grep -rn "${STAGE_ROOT}" "${GEN}"; then
	echo "update-codegen: generated code still refers to the staging directory ${STAGE_ROOT}" >&2
	exit 1
fi

rm -rf "${OUT_DIR}/clientset" "${OUT_DIR}/listers" "${OUT_DIR}/informers"
mkdir -p "${OUT_DIR}"
mv "${GEN}/clientset" "${GEN}/listers" "${GEN}/informers" "${OUT_DIR}/"

echo ">> done"
