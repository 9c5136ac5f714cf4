#!/bin/bash
# One row of bench/README.md's table: the agentic benchmark (scenarios/bench/agentic-100k.yaml) at N requests, on one
# thread (bench/timed_run.sh prints the row, the core's clock and the CPU time in cycles).
#   bench/agentic.sh ./build/tools/servesim 1000000 [more --set overrides...]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
exec "$here/bench/timed_run.sh" "$1" "$here/scenarios/bench/agentic-100k.yaml" "$2" "${@:3}"
