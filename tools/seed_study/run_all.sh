#!/usr/bin/env bash
# Runs every seed-study scenario (scenarios/seed-study/*.yaml) into out/seed-study/*.csv, the capacity figures of
# `servesim inspect` into out/seed-study/capacity.json, then writes scenarios/seed-study/RESULTS.md and its plots.
# Usage (after tools/setup.sh): tools/seed_study/run_all.sh [--no-report]
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=./build/tools/servesim
out=out/seed-study
mkdir -p "$out"
start_ns=$(date +%s%N)
for s in tenant-sweep pool-size fp8 prefix-caching offload prefill-curve break-even sensitivity block-size h200 \
         vllm-versions clients; do
  f=scenarios/seed-study/$s.yaml
  if [ "$s" = h200 ] && [ ! -f calibration/profiles/h200/Qwen3-4B.yaml ]; then
    echo "run_all: skipping h200 (no calibrated H200 profiles yet)" >&2
    continue
  fi
  if [ "$s" = clients ]; then
    # every point with 5 seeds: the spread the client model and the seed leave (RESULTS.md §12)
    "$bin" sweep "$f" --format csv --replicates 5 > "$out/$s.csv"
  elif [ "$s" = tenant-sweep ]; then
    # also the time series (queue length, KV usage) of every point
    "$bin" sweep "$f" --format csv --out "$out/tenant-sweep-out" > "$out/$s.csv"
  else
    "$bin" sweep "$f" --format csv > "$out/$s.csv"
  fi
done
# Measurements 2-4 (fp8, prefix caching off/on, offload) under each tenant client, 5 seeds each (RESULTS.md §12)
for f in fp8 prefix-caching offload; do
  for p in per_tenant_stream sleep_after_answer global_fifo global_random; do
    "$bin" sweep scenarios/seed-study/$f.yaml --set workload.pacing=$p --replicates 5 --format csv \
      > "$out/clients-$f-$p.csv"
  done
done
{
  echo "["
  first=1
  for m in Qwen3-4B Qwen3.5-4B; do
    for dtype in auto fp8; do
      for pc in --no-enable-prefix-caching --enable-prefix-caching; do
        [ $first = 1 ] || echo ","
        first=0
        "$bin" inspect --model $m --gpu rtx3090 --gpu-memory-utilization 0.9 --max-model-len 16384 \
          --kv-cache-dtype $dtype $pc --format json
      done
    done
  done
  echo "]"
} > "$out/capacity.json"
end_ns=$(date +%s%N)
echo "run_all: all seed-study scenarios in $(( (end_ns - start_ns) / 1000000 )) ms" >&2
if [ "${1:-}" != "--no-report" ]; then
  # Debian's python3 has python3-matplotlib (a pyenv python on PATH may not).
  py=/usr/bin/python3; [ -x "$py" ] || py=python3
  "$py" tools/seed_study/report.py "$out" scenarios/seed-study
fi
