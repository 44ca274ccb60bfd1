#!/usr/bin/env bash
# Copies into the Helm chart what it ships as is from deploy/: the CRDs (files/crds/, read by
# templates/crds.yaml) and the monitoring kit's rules and dashboard (files/, read by
# templates/monitoring.yaml), and writes its README from its values with helm-docs. go test
# ./deploy fails when the copies or the README differ.
set -euo pipefail
cd "$(dirname "$0")/.."
chart=deploy/helm/celld-operator
rm -f "${chart}"/files/crds/*.yaml
cp deploy/crds/*.yaml "${chart}/files/crds/"
cp deploy/monitoring/prometheus_rule.yaml deploy/monitoring/dashboard.json "${chart}/files/"
# The chart's README, from values.yaml and README.md.gotmpl (helm-docs, built by cluster/tools.sh).
"${CLUSTER_BIN:-.cache/cluster/bin}/helm-docs" --chart-search-root "${chart}" --sort-values-order file --log-level warning >/dev/null
