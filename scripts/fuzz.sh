#!/usr/bin/env bash
# Builds fedagg's libFuzzer targets (the `fuzz` preset: clang with AddressSanitizer and
# UBSan, in build-fuzz/) and runs each one on its seed corpus (tests/fuzz/corpus/<target>).
#   scripts/fuzz.sh [SECONDS]   run every target SECONDS seconds (default 300); CI runs 15
#   scripts/fuzz.sh --seeds     regenerate the seed corpora with fedagg_fuzz_corpus
# Inputs the fuzzer finds go to build-fuzz/corpus/<target>, never into the checked-in
# seeds. A crash or a failed invariant stops the script with its input saved in
# build-fuzz/artifacts/ (replay: build-fuzz/tests/fuzz/<target>_fuzzer <that file>).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz

if [ "${1:-}" = "--seeds" ]; then
  rm -rf tests/fuzz/corpus
  build-fuzz/tests/fuzz/fedagg_fuzz_corpus tests/fuzz/corpus
  echo "fuzz: seeds written to tests/fuzz/corpus"
  exit 0
fi

seconds="${1:-300}"
ctest --test-dir build-fuzz --output-on-failure   # every seed replays cleanly
mkdir -p build-fuzz/artifacts
for target in contribute_request update_validation encoded_update_validation partial_aggregate deterministic_partial_aggregate chunk_reassembly \
              checkpoint_file; do
  mkdir -p "build-fuzz/corpus/$target"
  log="build-fuzz/artifacts/$target.log"
  echo "fuzz: $target for ${seconds}s"
  if ! "build-fuzz/tests/fuzz/${target}_fuzzer" -max_total_time="$seconds" \
        -artifact_prefix="build-fuzz/artifacts/$target-" \
        "build-fuzz/corpus/$target" "tests/fuzz/corpus/$target" >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "fuzz: $target FAILED; the input is in build-fuzz/artifacts/" >&2
    exit 1
  fi
  grep -E "^Done|DONE" "$log" | tail -n 1
done
echo "fuzz: every target ran ${seconds}s without a finding"
