#!/usr/bin/env bash
# The long, opt-in fuzzing run: the differential fuzzer and the property tests with the "long"
# hypothesis profile (5000 examples per test and backend), on every backend available here.
#   tools/fuzz.sh [extra pytest args, e.g. -k sim]
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
CUTOPK_HYPOTHESIS_PROFILE=long python -m pytest -q -p no:cacheprovider \
  tests/fuzz/test_fuzz.py tests/fuzz/test_properties.py "$@"
echo "fuzzing took $(( $(date +%s) - start )) s"
