#!/usr/bin/env bash
# Builds the whole CPU test suite under AddressSanitizer + UndefinedBehaviorSanitizer and runs every ctest but the
# GPU ones (docs/FUZZING.md "Sanitizer builds"). CI runs the GCC half's build (.ci/run, tests one at a time); the clang
# half is run by hand.
#   tools/sanitize.sh [--compiler gcc|clang] [--jobs N] [--build-only] [-- CTEST_ARGS...]
# gcc (default) builds in build-asan/, clang (clang++-14 or clang++, Debian's clang and libclang-rt-dev) in
# build-clang-san/. CUDA, the benchmarks and MPI are off in both (Open MPI's own allocations show as leaks under
# LeakSanitizer; the MPI ctests run in the normal build). ccache is used when installed. On a shared machine run it
# as `nice -n 15 tools/sanitize.sh ...`: the build and the tests inherit the niceness.
set -euo pipefail
cd "$(dirname "$0")/.."
compiler=gcc
jobs=$(nproc)
build_only=0
while (($#)); do
  case "$1" in
    --compiler) compiler=${2:-}; shift 2 || { echo "sanitize.sh: --compiler needs gcc or clang" >&2; exit 2; } ;;
    --jobs) jobs=${2:-}; shift 2 || { echo "sanitize.sh: --jobs needs a number" >&2; exit 2; } ;;
    --build-only) build_only=1; shift ;;
    --) shift; break ;;
    *) echo "sanitize.sh: unknown argument '$1'; allowed: --compiler gcc|clang, --jobs N, --build-only, -- CTEST_ARGS" >&2
       exit 2 ;;
  esac
done
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "sanitize.sh: --jobs '$jobs': allowed a whole number >= 1" >&2; exit 2; }

sanitizers="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
case "$compiler" in
  gcc)
    build=build-asan
    cxx=g++
    # -Wno-maybe-uninitialized, -Wno-uninitialized: GCC 12 reports false positives inside <regex>, <functional> and
    # Boost.Graph (boost::optional in named_graph.hpp) under the sanitizers; the normal build keeps both warnings.
    flags="$sanitizers -Wno-maybe-uninitialized -Wno-uninitialized"
    # -O2 -g: CMake's RelWithDebInfo as it stands.
    config=()
    ;;
  clang)
    build=build-clang-san
    cxx=$(command -v clang++-14 || command -v clang++ || true)
    [ -n "$cxx" ] || { echo "sanitize.sh: --compiler clang needs clang++ (apt-get install clang libclang-rt-dev)" >&2; exit 2; }
    flags="$sanitizers"
    # -O1 (the sanitizers' documented minimum for usable speed) and line tables only: the build is the long part on
    # a small machine (the tests take a few minutes), and a report's stack still names file and line.
    config=("-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG")
    ;;
  *) echo "sanitize.sh: --compiler '$compiler': allowed gcc, clang" >&2; exit 2 ;;
esac
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" "${launcher[@]}" "${config[@]}" \
  -DSERVESIM_CUDA=OFF -DSERVESIM_BUILD_BENCH=OFF -DSERVESIM_MPI=OFF \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >&2
cmake --build "$build" -j "$jobs" >&2
if ((build_only)); then exit 0; fi
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
  ctest --test-dir "$build" --output-on-failure -LE gpu -j "$jobs" "$@"
