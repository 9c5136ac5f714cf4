#!/usr/bin/env bash
# The training runs of the profile-guided build (docs/BUILD.md "Profile-guided build"): an instrumented servesim runs
# the shipped scenarios below, one thread each, and its counters say which branches and calls are hot. The list
# covers the engine's paths a user reaches (single replica with and without prefix caching, offload, fp8, hybrid
# models and their cache policies, the benchmark clients, trace replay, tensor parallelism, a cluster with a
# Mooncake pool, prefill-decode disaggregation, the planner's sweep), and the two speed benchmarks' workloads
# (scenarios/bench/) at a tenth of their size or less, with another seed: the engine's most common use, many tenants'
# multi-turn dialogues over a prefix cache, is what the shipped scenarios run least of (docs/BUILD.md gives the
# gain with and without these two).
#   tools/pgo_train.sh BUILD/tools/servesim
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$1
runs=(
  "run scenarios/quickstart.yaml"
  "run scenarios/seed-study/prefix-caching.yaml"
  "run scenarios/seed-study/block-size.yaml"
  "run scenarios/seed-study/fp8.yaml"
  "run scenarios/seed-study/offload.yaml"
  "run scenarios/seed-study/clients.yaml"
  "run scenarios/seed-study/vllm-versions.yaml"
  "run scenarios/seed-study/tenant-sweep.yaml"
  "run scenarios/clients/bench-serve.yaml"
  "run scenarios/clients/multi-turn-bench.yaml"
  "run scenarios/clients/sharegpt-replay.yaml"
  "run scenarios/hybrid-policies/agentic.yaml"
  "run scenarios/hybrid-policies/tenants.yaml"
  "run scenarios/hybrid-policies/tenants-fp8.yaml"
  "run scenarios/traces/mooncake-conversation-replay.yaml"
  "run scenarios/h200/qwen3-next-tp2.yaml"
  "run scenarios/quant/llama-405b-fp8.yaml"
  "run scenarios/cluster/pd-disagg.yaml"
  "run scenarios/cluster/mooncake-10node.yaml"
  "run scenarios/plan/agentic-8b.yaml"
  "run scenarios/bench/agentic-100k.yaml --set workload.num_requests=100000 --set seed=2"
  "run scenarios/bench/cluster-16x1m.yaml --set workload.num_requests=50000 --set seed=2"
)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for r in "${runs[@]}"; do
  # The scenarios' own warnings (overloaded sweeps, rejected trace requests) are expected; shown only on failure.
  # shellcheck disable=SC2086  # the run's words are split on purpose
  if ! "$bin" $r --jobs 1 > /dev/null 2> "$log"; then
    cat "$log" >&2
    echo "pgo_train: '$bin $r --jobs 1' failed" >&2
    exit 1
  fi
done
