#!/usr/bin/env bash
# Installs what servesim needs from Debian's packages (only what is missing) and builds it in build/.
# Usage: tools/setup.sh [--no-build]. Set SERVESIM_BUILD_DIR to build elsewhere.
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

if [ "${1:-}" != "--no-build" ]; then
  build="${SERVESIM_BUILD_DIR:-build}"
  pgo=()
  # The profile-guided build (docs/BUILD.md): an instrumented simulator in $build/pgo-instrumented runs
  # tools/pgo_train.sh, then $build is compiled with its counts. SERVESIM_PGO=0 skips it (a plain Release build);
  # so does a compiler other than GCC 12 or later (CMake's, $CXX or c++).
  gcc_major=$(echo | "${CXX:-c++}" -x c++ -dM -E - 2>/dev/null |
    awk '/#define __clang__/ { clang = 1 } /#define __GNUC__ / { v = $3 } END { print clang ? 0 : v + 0 }')
  if [ "${SERVESIM_PGO:-1}" != 0 ] && [ "${gcc_major:-0}" -ge 12 ]; then
    mkdir -p "$build"
    profile="$(cd "$build" && pwd)/pgo-profile"
    rm -rf "$profile"
    cmake -S . -B "$build/pgo-instrumented" -DCMAKE_BUILD_TYPE=Release -DSERVESIM_BUILD_TESTS=OFF \
      -DSERVESIM_PGO=GENERATE -DSERVESIM_PGO_DIR="$profile" >&2
    cmake --build "$build/pgo-instrumented" --target servesim -j "$(nproc)" >&2
    echo "setup: training the profile-guided build (tools/pgo_train.sh)" >&2
    tools/pgo_train.sh "$build/pgo-instrumented/tools/servesim" >&2
    pgo=(-DSERVESIM_PGO=USE -DSERVESIM_PGO_DIR="$profile")
  else
    pgo=(-DSERVESIM_PGO=OFF)
  fi
  # Link-time optimisation of the servesim executable (docs/BUILD.md "Link-time optimisation"), with GCC;
  # SERVESIM_LTO=0 leaves it out.
  lto=(-DSERVESIM_LTO=OFF)
  if [ "${SERVESIM_LTO:-1}" != 0 ] && [ "${gcc_major:-0}" -ge 12 ]; then
    lto=(-DSERVESIM_LTO=ON)
  fi
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "${pgo[@]}" "${lto[@]}" >&2
  cmake --build "$build" -j "$(nproc)" >&2
fi
