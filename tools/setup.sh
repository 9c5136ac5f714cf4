#!/usr/bin/env bash
# Installs what servesim needs from Debian's packages (only what is missing) and builds it in build/.
# Usage: tools/setup.sh [--tests | --no-build]. Set SERVESIM_BUILD_DIR to build elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake libboost-dev libboost-graph-dev libboost-program-options-dev libeigen3-dev
          libyaml-cpp-dev libfmt-dev catch2 nlohmann-json3-dev libbenchmark-dev python3-matplotlib
          libopenmpi-dev openmpi-bin zlib1g-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q >&2 || true
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
fi

# What to build. Default: the `servesim` executable alone, a plain Release build: the first command a newcomer runs
# should take minutes, not a quarter of an hour (issue 39). --tests: everything (the test suites, the benchmarks,
# `servesim-calibrate` when CUDA is on), which the README's test command asks for. --no-build: packages only.
# Opt-in, each with its measured gain in docs/BUILD.md (outputs are byte-identical either way):
#   SERVESIM_PGO=1   profile-guided build (an instrumented build runs tools/pgo_train.sh first; ~3 % faster on the
#                    agentic benchmark, ~10 % on the quickstart; GCC 12 or later)
#   SERVESIM_LTO=1   link-time optimisation of `servesim` (GCC; median 1.2 % faster at 1M requests)
#   SERVESIM_CUDA=1  the CUDA calibration kernels and `servesim-calibrate` (needs nvcc)
mode="${1:-servesim}"
case "$mode" in
  servesim|--tests|--no-build) ;;
  *) echo "setup: unknown argument '$mode'; allowed: --tests, --no-build (or none: build servesim only)" >&2; exit 2 ;;
esac

if [ "$mode" != "--no-build" ]; then
  build="${SERVESIM_BUILD_DIR:-build}"
  targets=(--target servesim)
  if [ "$mode" = "--tests" ]; then targets=(); fi
  gcc_major=$(echo | "${CXX:-c++}" -x c++ -dM -E - 2>/dev/null |
    awk '/#define __clang__/ { clang = 1 } /#define __GNUC__ / { v = $3 } END { print clang ? 0 : v + 0 }')
  pgo=(-DSERVESIM_PGO=OFF)
  # The profile-guided build (docs/BUILD.md): an instrumented simulator in $build/pgo-instrumented runs
  # tools/pgo_train.sh, then $build is compiled with its counts.
  if [ "${SERVESIM_PGO:-0}" = 1 ]; then
    if [ "${gcc_major:-0}" -lt 12 ]; then
      echo "setup: SERVESIM_PGO=1 needs GCC 12 or later (this compiler: ${CXX:-c++}); building without it" >&2
    else
      mkdir -p "$build"
      profile="$(cd "$build" && pwd)/pgo-profile"
      rm -rf "$profile"
      cmake -S . -B "$build/pgo-instrumented" -DCMAKE_BUILD_TYPE=Release -DSERVESIM_BUILD_TESTS=OFF \
        -DSERVESIM_CUDA=OFF -DSERVESIM_PGO=GENERATE -DSERVESIM_PGO_DIR="$profile" >&2
      cmake --build "$build/pgo-instrumented" --target servesim -j "$(nproc)" >&2
      echo "setup: training the profile-guided build (tools/pgo_train.sh)" >&2
      tools/pgo_train.sh "$build/pgo-instrumented/tools/servesim" >&2
      pgo=(-DSERVESIM_PGO=USE -DSERVESIM_PGO_DIR="$profile")
    fi
  fi
  lto=(-DSERVESIM_LTO=OFF)
  if [ "${SERVESIM_LTO:-0}" = 1 ] && [ "${gcc_major:-0}" -ge 12 ]; then
    lto=(-DSERVESIM_LTO=ON)
  fi
  cuda=(-DSERVESIM_CUDA=OFF)
  if [ "${SERVESIM_CUDA:-0}" = 1 ]; then cuda=(-DSERVESIM_CUDA=ON); fi
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "${pgo[@]}" "${lto[@]}" "${cuda[@]}" >&2
  cmake --build "$build" "${targets[@]}" -j "$(nproc)" >&2
fi
