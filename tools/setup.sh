#!/usr/bin/env bash
# Installs what servesim needs from Debian's packages (only what is missing) and builds it in build/.
# Usage: tools/setup.sh [--no-build]. Set SERVESIM_BUILD_DIR to build elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake libboost-dev libboost-graph-dev libboost-program-options-dev libeigen3-dev
          libyaml-cpp-dev libfmt-dev catch2 nlohmann-json3-dev libbenchmark-dev python3-matplotlib
          libopenmpi-dev openmpi-bin)
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
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >&2
  cmake --build "$build" -j "$(nproc)" >&2
fi
