#!/bin/bash
# One device call of the H200 calibration (issue 4): `sweep` builds, runs the GPU checks and kernel timings, the
# kernels-vs-torch ratios and the four model sweeps; `compose` runs the torch composition check; `all` runs the
# checks, the sweeps (with whole-forward composition) and the torch composition. Everything lands in $OUT (logs printed last as a short table). Usage: h200_run.sh sweep|compose|all [notorch]|final|moe
# (sweep, final and all also calibrate Qwen3-Next-80B-A3B at --tensor-parallel-size 2; moe runs only that)
set -o pipefail
B=/tmp/servesim-build
MODELS="Qwen3-4B Qwen3.5-4B Qwen3-8B Llama-3.1-8B"
# MoE at tensor parallelism 2 (80B in bf16 does not fit one H200): one rank's shapes, whole per-rank forwards.
MOE_MODEL=Qwen3-Next-80B-A3B
MOE_TP=2
moe_sweep() {  # $1: log file
  mkdir -p /tmp/points/$MOE_MODEL
  $B/calibration/servesim-calibrate --model $MOE_MODEL --tensor-parallel-size $MOE_TP \
    --out $OUT/profiles/$MOE_MODEL-tp$MOE_TP.yaml --log-dir /tmp/points/$MOE_MODEL >> $1 2>&1
  echo "sweep $MOE_MODEL tp$MOE_TP rc $?"
}
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DSERVESIM_CALIBRATION_ONLY=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DSERVESIM_BUILD_TESTS=OFF > $OUT/cfg.log 2>&1 || { tail -30 $OUT/cfg.log; exit 1; }
cmake --build $B -j16 --target servesim-kernel-check servesim-calibrate servesim_kernels_c > $OUT/build.log 2>&1 \
  || { grep -B2 -A8 error $OUT/build.log | head -60; exit 1; }
mkdir -p $OUT/profiles /tmp/points
if [ "$1" = sweep ]; then
  $B/kernels/servesim-kernel-check --bench --csv $OUT/bench.csv > $OUT/check.log 2>&1; echo "kernel-check rc $?"
  grep -E "checks:|FAIL" $OUT/check.log
  PYTHONUNBUFFERED=1 python3 calibration/runner/composition.py --lib $B/kernels/libservesim_kernels_c.so \
    --outdir $OUT --bench-csv $OUT/bench.csv > $OUT/torch_ratio.log 2>&1; echo "kernels-vs-torch rc $?"
  for m in $MODELS; do
    mkdir -p /tmp/points/$m
    $B/calibration/servesim-calibrate --model $m --out $OUT/profiles/$m.yaml --log-dir /tmp/points/$m \
      >> $OUT/sweep.log 2>&1; echo "sweep $m rc $?"
  done
  moe_sweep $OUT/sweep.log
  cp -r /tmp/points $OUT/profiles/points
  tar czf $OUT/sweep.tgz -C $OUT profiles cfg.log build.log && rm -rf $OUT/profiles $OUT/cfg.log $OUT/build.log
  cat $OUT/sweep.log; tail -40 $OUT/torch_ratio.log; grep -v "^  " $OUT/check.log | head; tail -48 $OUT/check.log
elif [ "$1" = final ]; then
  # Checks, kernel timings, kernels-vs-torch, and the sweeps with whole-forward composition (no torch stack).
  $B/kernels/servesim-kernel-check --bench --csv $OUT/bench.csv > $OUT/check.log 2>&1; echo "kernel-check rc $?"
  grep -E "checks:|FAIL" $OUT/check.log
  PYTHONUNBUFFERED=1 python3 calibration/runner/composition.py --lib $B/kernels/libservesim_kernels_c.so \
    --outdir $OUT --bench-csv $OUT/bench.csv > $OUT/torch_ratio.log 2>&1; echo "kernels-vs-torch rc $?"
  for m in $MODELS; do
    mkdir -p /tmp/points/$m
    $B/calibration/servesim-calibrate --model $m --out $OUT/profiles/$m.yaml --log-dir /tmp/points/$m \
      >> $OUT/sweep.log 2>&1; echo "sweep $m rc $?"
  done
  moe_sweep $OUT/sweep.log
  cp -r /tmp/points $OUT/profiles/points
  tar czf $OUT/final.tgz -C $OUT profiles cfg.log build.log && rm -rf $OUT/profiles $OUT/cfg.log $OUT/build.log
  grep -E "forward_|R2" $OUT/sweep.log | tail -90; grep prefill_attn $OUT/torch_ratio.log; grep -E "prefill_attn|decode_attn" $OUT/check.log
elif [ "$1" = all ]; then
  # GPU checks (the ctest "gpu" test's command), sweeps with whole-forward composition, then the torch stack.
  $B/kernels/servesim-kernel-check --check > $OUT/check.log 2>&1; echo "kernel-check rc $?"; grep -E "checks:|FAIL" $OUT/check.log
  for m in $MODELS; do
    mkdir -p /tmp/points/$m
    $B/calibration/servesim-calibrate --model $m --out $OUT/profiles/$m.yaml --log-dir /tmp/points/$m \
      >> $OUT/sweep.log 2>&1; echo "sweep $m rc $?"
  done
  moe_sweep $OUT/sweep.log
  cp -r /tmp/points $OUT/profiles/points
  for m in $([ "$2" = notorch ] || echo $MODELS); do
    PYTHONUNBUFFERED=1 timeout 100 python3 calibration/runner/composition.py --lib $B/kernels/libservesim_kernels_c.so \
      --outdir $OUT/profiles --model $m >> $OUT/compose.log 2>&1; echo "compose $m rc $?"
  done
  tar czf $OUT/all.tgz -C $OUT profiles cfg.log build.log && rm -rf $OUT/profiles $OUT/cfg.log $OUT/build.log
  grep -v "^ *$" $OUT/sweep.log | tail -120; grep -v "^ *$" $OUT/compose.log | tail -60
elif [ "$1" = moe ]; then
  # MoE only: the GPU checks, then the Qwen3-Next-80B-A3B TP-2 sweep with its per-rank whole-forward composition.
  $B/kernels/servesim-kernel-check --check > $OUT/check.log 2>&1; echo "kernel-check rc $?"
  grep -E "checks:|FAIL|moe" $OUT/check.log
  moe_sweep $OUT/sweep.log
  cp -r /tmp/points $OUT/profiles/points
  tar czf $OUT/moe.tgz -C $OUT profiles cfg.log build.log && rm -rf $OUT/profiles $OUT/cfg.log $OUT/build.log
  grep -v "^ *$" $OUT/sweep.log | tail -60
else
  for m in $MODELS; do
    PYTHONUNBUFFERED=1 python3 calibration/runner/composition.py --lib $B/kernels/libservesim_kernels_c.so \
      --outdir $OUT --model $m >> $OUT/compose.log 2>&1; echo "compose $m rc $?"
  done
  tar czf $OUT/compose.tgz -C $OUT $(cd $OUT && ls *.csv) && rm -f $OUT/*.csv
  cat $OUT/compose.log | grep -v "^ *$" | tail -80
fi
