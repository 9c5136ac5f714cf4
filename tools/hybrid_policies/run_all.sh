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
# Wall time, the CPU time of the runs (what a quiet machine would take, about) and the load they shared it with.
times > "$out/times.txt"  # in this shell: its second line is the CPU time of the commands it ran
cpu_s=$(tail -1 "$out/times.txt" | awk '{ split($1, u, "m"); split($2, s, "m"); printf "%.0f", u[1] * 60 + u[2] + s[1] * 60 + s[2] }')
load=$(cut -d' ' -f1-3 /proc/loadavg)
wall_s=$(( (end_ns - start_ns) / 1000000000 ))
echo "run_all: all hybrid-policy scenarios in ${wall_s} s wall, ${cpu_s} s CPU, load average ${load}" >&2
printf 'Last regeneration: the scenarios took %s s wall time and %s s of CPU on %s cores (load average %s at the end; other work shares the machine).\n' \
  "$wall_s" "$cpu_s" "$(nproc)" "$load" > "$out/timing.txt"
if [ "${1:-}" != "--no-report" ]; then
  py=/usr/bin/python3; [ -x "$py" ] || py=python3
  "$py" tools/hybrid_policies/report.py "$out" scenarios/hybrid-policies
fi
