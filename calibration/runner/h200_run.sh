#!/bin/bash
# One device call of the H200 calibration (issue 4). Usage: h200_run.sh sweep|final|all [notorch]|moe|fp8 M…|compose
#   sweep   checks + kernel timings, kernels-vs-torch ratios, the model sweeps (whole-forward composition included)
#   final   the same, printing the composition and attention lines
#   all     GPU checks only (the ctest "gpu" test's command), the sweeps, then the torch stack per model
#           (`notorch`: without it)
#   moe     GPU checks, then only the Qwen3-Next-80B-A3B TP-2 sweep
#   fp8     GPU checks (the fp8 GEMM and quantization included), then the fp8 W8A8 sweep of each model named
#           after it (profiles <model>-fp8.yaml); `fp8 nocheck M…` skips the checks
#   fp8-block  the same with block-scaled fp8 (128x128 weight tiles; profiles <model>-fp8-block.yaml); a model
#           written `M:fp8` in the list runs the per-tensor fp8 sweep instead (a pair on the same machine)
#   compose the torch composition check alone
# The sweeps are the four one-GPU models plus Qwen3-Next-80B-A3B at --tensor-parallel-size 2. Everything lands in
# $OUT (profiles and points packed into <mode>.tgz, logs beside it; a short summary printed last).
set -o pipefail
B=/tmp/servesim-build
MODELS="Qwen3-4B Qwen3.5-4B Qwen3-8B Llama-3.1-8B"
# MoE at tensor parallelism 2 (80B in bf16 does not fit one H200): one rank's shapes, whole per-rank forwards.
MOE_MODEL=Qwen3-Next-80B-A3B
MOE_TP=2

calibrate() {  # $1: model, $2: tensor-parallel size (default 1), $3: weight dtype (default bf16)
  local model=$1 tp=${2:-1} wd=${3:-bf16} name=$1
  [ "$tp" -gt 1 ] && name=$model-tp$tp
  [ "$wd" != bf16 ] && name=$name-$wd
  mkdir -p /tmp/points/$name
  $B/tools/servesim-calibrate --model $model --tensor-parallel-size $tp --weight-dtype $wd \
    --out $OUT/profiles/$name.yaml --log-dir /tmp/points/$name >> $OUT/sweep.log 2>&1
  echo "sweep $name rc $?"
}

all_sweeps() {
  for m in $MODELS; do
    calibrate $m
  done
  calibrate $MOE_MODEL $MOE_TP
}

checks() {  # the GPU checks alone
  $B/kernels/servesim-kernel-check --check > $OUT/check.log 2>&1
  echo "kernel-check rc $?"
}

checks_bench_ratios() {  # checks + kernel timings, then each timed kernel against torch on the same shapes
  $B/kernels/servesim-kernel-check --bench --csv $OUT/bench.csv > $OUT/check.log 2>&1
  echo "kernel-check rc $?"
  grep -E "checks:|FAIL" $OUT/check.log
  PYTHONUNBUFFERED=1 python3 calibration/runner/composition.py --lib $B/kernels/libservesim_kernels_c.so \
    --outdir $OUT --bench-csv $OUT/bench.csv > $OUT/torch_ratio.log 2>&1
  echo "kernels-vs-torch rc $?"
}

pack() {  # $1: archive name; profiles, points and the build logs into $OUT/$1.tgz
  cp -r /tmp/points $OUT/profiles/points
  tar czf $OUT/$1.tgz -C $OUT profiles cfg.log build.log && rm -rf $OUT/profiles $OUT/cfg.log $OUT/build.log
}

cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DSERVESIM_CALIBRATION_ONLY=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DSERVESIM_BUILD_TESTS=OFF > $OUT/cfg.log 2>&1 || { tail -30 $OUT/cfg.log; exit 1; }
cmake --build $B -j16 --target servesim-kernel-check servesim-calibrate servesim_kernels_c > $OUT/build.log 2>&1 \
  || { grep -B2 -A8 error $OUT/build.log | head -60; exit 1; }
mkdir -p $OUT/profiles /tmp/points
case "$1" in
  sweep)
    checks_bench_ratios
    all_sweeps
    pack sweep
    cat $OUT/sweep.log; tail -40 $OUT/torch_ratio.log; grep -v "^  " $OUT/check.log | head; tail -48 $OUT/check.log
    ;;
  final)
    checks_bench_ratios
    all_sweeps
    pack final
    grep -E "forward_|R2" $OUT/sweep.log | tail -90; grep prefill_attn $OUT/torch_ratio.log
    grep -E "prefill_attn|decode_attn" $OUT/check.log
    ;;
  all)
    checks
    grep -E "checks:|FAIL" $OUT/check.log
    all_sweeps
    for m in $([ "$2" = notorch ] || echo $MODELS); do
      PYTHONUNBUFFERED=1 timeout 100 python3 calibration/runner/composition.py \
        --lib $B/kernels/libservesim_kernels_c.so --outdir $OUT/profiles --model $m >> $OUT/compose.log 2>&1
      echo "compose $m rc $?"
    done
    pack all
    grep -v "^ *$" $OUT/sweep.log | tail -120; grep -v "^ *$" $OUT/compose.log | tail -60
    ;;
  fp8)
    shift
    if [ "$1" = nocheck ]; then shift; else checks; grep -E "checks:|FAIL|fp8" $OUT/check.log; fi
    for m in "$@"; do calibrate $m 1 fp8; done
    pack fp8
    grep -v "^ *$" $OUT/sweep.log | tail -60
    ;;
  fp8-block)
    shift
    if [ "$1" = nocheck ]; then shift; else checks; grep -E "checks:|FAIL|fp8" $OUT/check.log; fi
    for m in "$@"; do
      case "$m" in *:fp8) calibrate ${m%:fp8} 1 fp8 ;; *) calibrate $m 1 fp8-block ;; esac
    done
    pack fp8-block
    grep -v "^ *$" $OUT/sweep.log | tail -80
    ;;
  moe)
    checks
    grep -E "checks:|FAIL|moe" $OUT/check.log
    calibrate $MOE_MODEL $MOE_TP
    pack moe
    grep -v "^ *$" $OUT/sweep.log | tail -60
    ;;
  *)
    for m in $MODELS; do
      PYTHONUNBUFFERED=1 python3 calibration/runner/composition.py --lib $B/kernels/libservesim_kernels_c.so \
        --outdir $OUT --model $m >> $OUT/compose.log 2>&1
      echo "compose $m rc $?"
    done
    tar czf $OUT/compose.tgz -C $OUT $(cd $OUT && ls *.csv) && rm -f $OUT/*.csv
    grep -v "^ *$" $OUT/compose.log | tail -80
    ;;
esac
