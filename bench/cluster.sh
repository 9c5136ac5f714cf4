#!/bin/bash
# One row of the cluster benchmark (scenarios/bench/cluster-16x1m.yaml: 16 replicas, llm_d routing, a Mooncake pool)
# at N requests, on one thread (bench/timed_run.sh prints the row, the core's clock and the CPU time in cycles).
#   bench/cluster.sh ./build/tools/servesim 1000000 [more --set overrides...]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
exec "$here/bench/timed_run.sh" "$1" "$here/scenarios/bench/cluster-16x1m.yaml" "$2" "${@:3}"
