#!/usr/bin/env bash
# Regenerates every committed result of scenarios/traces/ (RESULTS.md quotes them):
#   the order-only capacity sweeps at block 16, 512 and 528 (results/*.csv, mooncake-capacity.png), and
#   the three timed replays (results/<scenario>.csv, one row each).
# Order-only mode has no engine, so no vLLM release applies to it; the timed replays follow the scenario's
# engine.vllm_version (the default, the newest modelled release, recorded in each CSV's vllm_version column).
#   scenarios/traces/run_all.sh [path/to/servesim]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
servesim="${1:-$root/build/tools/servesim}"
out="$here/results"
mkdir -p "$out"
"$servesim" sweep "$here/mooncake-capacity.yaml" --format csv > "$out/mooncake-capacity-b16.csv"
for b in 512 528; do
    "$servesim" sweep "$here/mooncake-capacity.yaml" --format csv --set engine.block_size=$b \
        > "$out/mooncake-capacity-b$b.csv"
done
/usr/bin/python3 "$root/tools/plot_capacity.py" "$out/mooncake-capacity-b16.csv" \
    "$out/mooncake-capacity-b512.csv" -o "$here/mooncake-capacity.png"
for s in mooncake-conversation-replay mooncake-conversation-replay-70b azure-conv-replay; do
    "$servesim" run "$here/$s.yaml" --format csv > "$out/$s.csv"
done
echo "scenarios/traces/results regenerated with $("$servesim" --version)"
