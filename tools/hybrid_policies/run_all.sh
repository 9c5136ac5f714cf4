#!/usr/bin/env bash
# Runs every hybrid-policy scenario (scenarios/hybrid-policies/*.yaml) into out/hybrid-policies/*.csv and the state
# sizes of `servesim inspect` into out/hybrid-policies/inspect-*.json, then writes
# scenarios/hybrid-policies/RESULTS.md and its plots (tools/hybrid_policies/report.py).
# Usage (after tools/setup.sh): tools/hybrid_policies/run_all.sh [--no-report]
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=./build/tools/servesim
out=out/hybrid-policies
mkdir -p "$out"
start_ns=$(date +%s%N)
for s in tenants tenants-fp8 agentic models mooncake mooncake-order-only; do
  "$bin" sweep scenarios/hybrid-policies/$s.yaml --format csv > "$out/$s.csv"
done
for m in Qwen3.5-4B Nemotron-H-8B; do
  "$bin" inspect --model $m --gpu H200 --vllm-version 0.26 --enable-prefix-caching --format json > "$out/inspect-$m.json"
done
"$bin" inspect --model Qwen3-Next-80B-A3B --gpu H200 -tp 2 --vllm-version 0.26 --enable-prefix-caching \
  --format json > "$out/inspect-Qwen3-Next-80B-A3B.json"
end_ns=$(date +%s%N)
echo "run_all: all hybrid-policy scenarios in $(( (end_ns - start_ns) / 1000000 )) ms" >&2
if [ "${1:-}" != "--no-report" ]; then
  py=/usr/bin/python3; [ -x "$py" ] || py=python3
  "$py" tools/hybrid_policies/report.py "$out" scenarios/hybrid-policies
fi
