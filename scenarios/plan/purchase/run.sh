#!/usr/bin/env bash
# Regenerates scenarios/plan/purchase/results/ and REPORT.md (make_report.py runs the plans and writes the report
# from their JSON). Run from anywhere after building; SERVESIM=path/to/servesim to pick the binary.
set -euo pipefail
cd "$(dirname "$0")/../../.."
export SERVESIM=${SERVESIM:-$PWD/build/tools/servesim}
/usr/bin/python3 -I scenarios/plan/purchase/make_report.py
