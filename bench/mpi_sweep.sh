#!/usr/bin/env bash
# The MPI sweep benchmark (docs/MPI.md "Expected speed-up"): scenarios/bench/sweep-200.yaml (200 experiments of
# unequal cost) with one thread per rank, run as one plain process (--jobs 1, then --jobs 2 for comparison) and under
# mpirun at 1, 2 and 4 ranks. Prints one row per run (wall s, CPU s of all ranks, speed-up over 1 rank in wall
# time) and checks that every run printed the same bytes. The load average before and after says how busy the machine was.
#   bench/mpi_sweep.sh [BINARY] [RANKS...]        default: build/tools/servesim, ranks 1 2 4
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-build/tools/servesim}"
shift || true
ranks=(1 2 4)
if (($#)); then ranks=("$@"); fi
scenario=scenarios/bench/sweep-200.yaml
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# time_cmd NAME CMD...: wall and CPU (user + sys of the command and its children) in seconds.
time_cmd() {
  local name="$1"
  shift
  /usr/bin/time -f "%e %U %S" -o "$out/$name.time" "$@" > "$out/$name.csv" 2> "$out/$name.err"
  read -r wall user sys < "$out/$name.time"
  echo "$wall $(echo "$user + $sys" | bc)"
}

echo "machine: $(nproc) cores; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| run | wall s | CPU s | speed-up (wall, vs 1 rank) |"
echo "|---|---:|---:|---:|"
read -r wall cpu <<< "$(time_cmd plain "$bin" sweep "$scenario" --jobs 1 --format csv)"
echo "| one process, --jobs 1 (no mpirun) | $wall | $cpu | |"
read -r wall cpu <<< "$(time_cmd threads "$bin" sweep "$scenario" --jobs 2 --format csv)"
cmp -s "$out/plain.csv" "$out/threads.csv" || { echo "--jobs 2 printed other bytes than --jobs 1" >&2; exit 1; }
echo "| one process, --jobs 2 (threads, for comparison) | $wall | $cpu | |"
base=""
for n in "${ranks[@]}"; do
  read -r wall cpu <<< "$(time_cmd "n$n" mpirun -n "$n" --oversubscribe "$bin" sweep "$scenario" --jobs 1 --format csv)"
  if [ -z "$base" ]; then base="$wall"; fi
  cmp -s "$out/plain.csv" "$out/n$n.csv" || { echo "mpirun -n $n printed other bytes than one process" >&2; exit 1; }
  echo "| mpirun -n $n, --jobs 1 | $wall | $cpu | $(echo "scale=2; $base / $wall" | bc) |"
  grep -h "MPI:" "$out/n$n.err" | sed 's/^/  /' >&2 || true
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg); outputs byte-identical: yes"
