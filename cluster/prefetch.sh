#!/usr/bin/env bash
# Resolves and downloads, ahead of the builds, the modules of everything cluster/build.sh,
# cluster/tools.sh and cluster/build-real.sh build and have not built yet: three streams at once,
# so that on a cold machine the downloads of the later builds overlap the compiling of the
# first instead of each build waiting for its own (.ci/run starts it beside the builds). The
# builds take the same per-folder locks, so one that reaches a folder being resolved waits for
# it, then finds it resolved. Nothing is built here.
#
#   cluster/prefetch.sh
set -euo pipefail
shopt -s inherit_errexit

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
start=${SECONDS}
pids=()
"${here}/tools.sh" --prepare &
pids+=($!)
"${here}/build.sh" --prepare --control-plane &
pids+=($!)
"${here}/build-real.sh" --prepare &
pids+=($!)
failed=0
for pid in "${pids[@]}"; do
	wait "${pid}" || failed=1
done
printf '[prefetch] done in %ds%s\n' "$((SECONDS - start))" "$( ((failed)) && echo ', with failures (the builds resolve what is missing themselves)')"
exit "${failed}"
