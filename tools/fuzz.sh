#!/usr/bin/env bash
# Fuzzes every reader of user input with libFuzzer (clang from Debian) under ASan and UBSan; docs/FUZZING.md.
#   tools/fuzz.sh [MINUTES_PER_TARGET] [TARGET...]     (default 1 minute, every target)
#   FUZZ_RUNS=N tools/fuzz.sh ...                       also stop each target after N cases (whichever comes first)
# Builds tests/fuzz/libfuzzer_main.cpp once per target in build-fuzz/, starts from a copy of the committed seeds
# (tests/fuzz/corpus/<target>/), and leaves crashers in build-fuzz/crashes/<target>/: add each to the corpus once
# fixed, so CI's bounded run (ctest -L fuzz) keeps it found.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-1}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(scenario hf_config mooncake azure profile measurements csv_trace requests_csv requests_jsonl gpu_file yaml_grammar)
fi
command -v clang++ >/dev/null || { echo "fuzz.sh: needs clang++ (apt-get install clang libclang-rt-dev)" >&2; exit 2; }
build=build-fuzz
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"
cmake -S . -B "$build/lib" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSERVESIM_CUDA=OFF -DSERVESIM_BUILD_BENCH=OFF \
  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_CXX_FLAGS="$flags -fsanitize=fuzzer-no-link" >&2
cmake --build "$build/lib" -j "${FUZZ_JOBS:-$(nproc)}" --target servesim_fuzz_targets >&2
libs=$(find "$build/lib" -name 'libservesim_*.a' | sort)
for t in "${targets[@]}"; do
  bin="$build/fuzz_$t"
  # The static libraries depend on each other in layers: list them twice so every symbol resolves.
  clang++ -std=c++20 $flags -fsanitize=fuzzer -I. -I"$build/lib/planner/generated" \
    -DSERVESIM_FUZZ_TARGET="\"$t\"" tests/fuzz/libfuzzer_main.cpp \
    -Wl,--start-group $libs -Wl,--end-group -lyaml-cpp -lfmt -lz -o "$bin"
  mkdir -p "$build/corpus/$t" "$build/crashes/$t"
  cp -n tests/fuzz/corpus/"$t"/* "$build/corpus/$t/" 2>/dev/null || true
  echo "fuzz.sh: $t for $minutes min" >&2
  "$bin" -max_total_time=$((minutes * 60)) ${FUZZ_RUNS:+-runs=$FUZZ_RUNS} -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix="$build/crashes/$t/" "$build/corpus/$t" 2>&1 | grep -E "^(Done|stat::|==[0-9]+==|SUMMARY|.*runtime error|INFO: a corpus)" | tail -n 12 || true
done
