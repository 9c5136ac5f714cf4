#!/bin/bash
# One benchmark row: SCENARIO at N requests, run by the given servesim binary on one thread, timed by /usr/bin/time -v.
#   bench/timed_run.sh ./build/tools/servesim scenarios/bench/agentic-100k.yaml 1000000 [more --set overrides...]
# Prints: requests | wall s | CPU s (user + sys) | peak RSS MiB | the simulator's own wall-time line; then, where
# servesim_core_clock was built beside the binary (build/bench/), the core's clock and the CPU time in cycles, the
# figure that compares across machines (bench/README.md, "Reading a time"). bench/agentic.sh and bench/cluster.sh
# call it with their scenarios.
set -euo pipefail
bin=$1
scenario=$2
n=$3
shift 3
log=$(mktemp)
/usr/bin/time -v "$bin" run "$scenario" --jobs 1 --set workload.num_requests="$n" "$@" > /dev/null 2> "$log"
row=$(awk -v n="$n" '
  /Elapsed \(wall clock\)/ { split($NF, t, ":"); wall = (length(t) == 3) ? t[1] * 3600 + t[2] * 60 + t[3] : t[1] * 60 + t[2] }
  /User time/ { user = $NF }
  /System time/ { sys = $NF }
  /Maximum resident set size/ { rss = $NF / 1024 }
  /experiment\(s\) in/ { inner = $0 }
  END { printf "| %d | %.2f | %.2f | %.1f | %s\n", n, wall, user + sys, rss, inner }' "$log")
rm -f "$log"
echo "$row"
clock_bin="$(dirname "$bin")/../bench/servesim_core_clock"
if [ -x "$clock_bin" ]; then
  ghz=$("$clock_bin" | awk '{ print $3 }')
  echo "$row" | awk -F'|' -v ghz="$ghz" '{ printf "core clock %s GHz: %.2f s of CPU = %.1f G cycles\n", ghz, $4, $4 * ghz }'
fi
