#!/usr/bin/env bash
# Regenerates scenarios/h200/results/: the Qwen3-Next-80B-A3B TP-2 sweep (calibrated profile vs roofline) under
# the rules of vLLM 0.22, 0.26 and the newest modelled release, so calibration/profiles/h200/REPORT.md can show
# what each release's hybrid prefix-caching rules change for the same workload (docs/VLLM-VERSIONS.md).
#   scenarios/h200/run_all.sh [path/to/servesim]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
servesim="${1:-$root/build/tools/servesim}"
mkdir -p "$here/results"
for v in 0.22 0.26 0.30; do
    "$servesim" sweep "$here/qwen3-next-tp2.yaml" --format csv --set engine.vllm_version=$v \
        > "$here/results/qwen3-next-tp2-vllm-$v.csv"
done
echo "scenarios/h200/results regenerated with $("$servesim" --version)"
