#!/bin/bash
# One device call of the H200 calibration (issue 4): `sweep` builds, runs the GPU checks and kernel timings, the
# kernels-vs-torch ratios and the four model sweeps; `compose` runs the composition check and merges it into the
# profiles. Everything lands in $OUT (logs printed last as a short table). Usage: h200_run.sh sweep|compose
set -o pipefail
B=/tmp/servesim-build
MODELS="Qwen3-4B Qwen3.5-4B Qwen3-8B Llama-3.1-8B"
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
  cp -r /tmp/points $OUT/profiles/points
  tar czf $OUT/sweep.tgz -C $OUT profiles cfg.log build.log && rm -rf $OUT/profiles $OUT/cfg.log $OUT/build.log
  cat $OUT/sweep.log; tail -40 $OUT/torch_ratio.log; grep -v "^  " $OUT/check.log | head; tail -48 $OUT/check.log
else
  for m in $MODELS; do
    PYTHONUNBUFFERED=1 python3 calibration/runner/composition.py --lib $B/kernels/libservesim_kernels_c.so \
      --outdir $OUT --model $m >> $OUT/compose.log 2>&1; echo "compose $m rc $?"
  done
  tar czf $OUT/compose.tgz -C $OUT $(cd $OUT && ls *.csv) && rm -f $OUT/*.csv
  cat $OUT/compose.log | grep -v "^ *$" | tail -80
fi
