#!/bin/bash
# Two builds timed side by side: BIN_A and BIN_B run the same benchmark at the same time, each pinned to a core of
# its own (taskset), and swap cores every round. A shared host's neighbours and clock changes then slow both runs of
# a round alike, so the ratio of a round is steadier than that of two runs one after the other (bench/README.md,
# "Reading a time"). Needs two idle cores; the two runs share the last-level cache and the memory bus, as two
# tenants of one host do.
#   bench/pair.sh BIN_A BIN_B bench/cluster.sh 1000000 [ROUNDS, default 2]
# Prints per round: A's CPU s, B's CPU s and B/A.
set -euo pipefail
a=$1
b=$2
bench=$3
n=$4
rounds=${5:-2}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for i in $(seq "$rounds"); do
  if [ $((i % 2)) = 1 ]; then core_a=0; core_b=1; else core_a=1; core_b=0; fi
  taskset -c "$core_a" "$bench" "$a" "$n" > "$out/a" 2>&1 &
  taskset -c "$core_b" "$bench" "$b" "$n" > "$out/b" 2>&1
  wait
  cpu_a=$(head -1 "$out/a" | cut -d'|' -f4)
  cpu_b=$(head -1 "$out/b" | cut -d'|' -f4)
  awk -v i="$i" -v x="$cpu_a" -v y="$cpu_b" 'BEGIN { printf "round %d: A %.2f s  B %.2f s  B/A %.3f\n", i, x, y, y / x }'
done
