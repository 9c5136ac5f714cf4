#!/usr/bin/env bash
# Runs every hybrid-policy scenario (scenarios/hybrid-policies/*.yaml), under the default vLLM release and 0.26, into
# out/hybrid-policies/{default,0.26}/*.csv and the state
# sizes of `servesim inspect` into out/hybrid-policies/inspect-*.json, then writes
# scenarios/hybrid-policies/RESULTS.md and its plots (tools/hybrid_policies/report.py).
# Usage (after tools/setup.sh): [SERVESIM=build-dev/tools/servesim] tools/hybrid_policies/run_all.sh [--no-report]
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${SERVESIM:-./build/tools/servesim}  # SERVESIM=path/to/servesim to use another build
out=out/hybrid-policies
mkdir -p "$out"
start_ns=$(date +%s%N)
# Every scenario twice (issue 44): under servesim's default vLLM release (the scenarios' pin removed: null) into
# $out/default/, and under 0.26 (the seed study's release, the scenarios' pin) into $out/0.26/. The report reads
# each run's release from its CSV (vllm_version).
for release in default 0.26; do
  mkdir -p "$out/$release"
  if [ "$release" = default ]; then set_release=null; else set_release=$release; fi
  for s in tenants tenants-fp8 agentic models mooncake mooncake-order-only; do
    "$bin" sweep scenarios/hybrid-policies/$s.yaml --set engine.vllm_version=$set_release --format csv \
      > "$out/$release/$s.csv"
  done
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
