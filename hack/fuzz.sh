#!/usr/bin/env bash
# Runs the contract property tests (without and with node drains) over many random lifecycle
# sequences, split across the machine's cores (each worker with its own seed) and between the two
# tests, and prints the totals.
# Usage: hack/fuzz.sh [SEQUENCES]   (default 20000; FUZZ_WORKERS=N sets the workers, default one a core)
set -euo pipefail
cd "$(dirname "$0")/.."
total=${1:-20000}
workers=${FUZZ_WORKERS:-$(nproc)}
per=$(( (total + 2 * workers - 1) / (2 * workers) ))
go test -c -o .cache/proptest.test ./proptest
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
start=$(date +%s)
pids=()
for i in $(seq 1 "$workers"); do
  seed=$(( $(date +%s%N) % 1000000007 + i ))
  echo "worker $i: $per sequences of each test, -rapid.seed=$seed"
  (cd proptest && ../.cache/proptest.test -test.run '^TestContract(UnderDrains)?$' -test.timeout 6h \
     -rapid.checks="$per" -rapid.seed="$seed" -rapid.nofailfile >"$dir/$i.log" 2>&1) &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
sequences=0 rounds=0 checks=0
for i in $(seq 1 "$workers"); do
  # One line per test: TestContract's and TestContractUnderDrains'.
  while read -r s r c; do
    sequences=$((sequences + s)) rounds=$((rounds + r)) checks=$((checks + c))
  done < <(grep -E '^proptest: ' "$dir/$i.log" | sed -E 's/proptest: ([0-9]+) sequences, ([0-9]+) rounds.*, ([0-9]+) contract checks.*/\1 \2 \3/')
  if grep -q -- '--- FAIL' "$dir/$i.log"; then
    echo "worker $i FAILED:"; grep -E 'violated|reproduce|seed' "$dir/$i.log" | head -5
  fi
done
echo "fuzz: $sequences sequences, $rounds rounds (operator steps), $checks contract checks in $(( $(date +%s) - start ))s"
if [ "$status" -ne 0 ]; then echo "fuzz: VIOLATION (see above; replay with go test ./proptest -run TestContract -rapid.seed=SEED -story)"; exit 1; fi
# The workers' coverage tables, summed: per clause the real writes, deletions and decisions
# judged, per fault kind how often it occurred. A zero anywhere fails the run.
echo "fuzz: coverage over all workers (judged / occurred):"
cat "$dir"/*.log | grep -E '^coverage: ' | awk '{
    kind = $2; n = $3; $1 = $2 = $3 = ""; name = substr($0, 4)
    key = kind "\t" name
    if (!(key in sum)) order[++count] = key
    sum[key] += n
  } END {
    zero = 0
    for (i = 1; i <= count; i++) {
      split(order[i], kv, "\t")
      printf "  %-6s %10d  %s\n", kv[1], sum[order[i]], kv[2]
      if (sum[order[i]] == 0) zero++
    }
    if (count == 0) { print "  no coverage table printed"; exit 1 }
    exit zero > 0
  }' || { echo "fuzz: a clause judged nothing or a fault kind never occurred"; exit 1; }
echo "fuzz: 0 violations"
