#!/usr/bin/env bash
# Regenerates scenarios/plan/results/ (the figures quoted in REPORT.md): the three planner questions on the
# agentic 8B example, Llama-3.1-8B and Qwen3-8B on H100, H200 and L40S. Run from anywhere after tools/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
servesim=${SERVESIM:-./build/tools/servesim}
out=scenarios/plan/results
mkdir -p "$out"
slo="ttft_p99=2s,tpot_p99=50ms"
grid=(--grid gpu=H100,H200,L40S --prices scenarios/plan/agentic-prices.yaml)
# 1. The largest sustainable request rate of one GPU of each kind, and its cost per token.
"$servesim" plan scenarios/plan/agentic-8b.yaml --slo "$slo" "${grid[@]}" --start-load 4 --replicates 3 \
  --out "$out/max-load" --plot > /dev/null
# 2. GPUs for a target of 40 requests/s (replicas of one GPU each, round-robin), and 3. the cheapest of them.
"$servesim" plan scenarios/plan/agentic-8b.yaml --slo "$slo" "${grid[@]}" --target-rate 40 --replicates 3 \
  --out "$out/target-40rps" --plot > /dev/null
echo "plan: wrote $out/max-load and $out/target-40rps" >&2
