// Fuzz target: PartialAggregate::Deserialize of arbitrary bytes (what a child aggregator
// pushes up the tree) against a spec with every accumulator kind. Built twice: against
// fuzz::FuzzSpec (format version 1) and, as deterministic_partial_aggregate_fuzzer
// (FEDAGG_FUZZ_DETERMINISTIC), against fuzz::DeterministicFuzzSpec (version 2, exact
// sums). Invariants: what
// deserializes re-serializes to bytes that deserialize to the same serialization (a
// stable round trip), merges into an empty aggregate, and reports without crashing.
#include <cstddef>
#include <cstdint>

#include "service/core/partial_aggregate.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fedagg;
#if FEDAGG_FUZZ_DETERMINISTIC
  static const std::shared_ptr<const ReductionSpec> spec = fuzz::DeterministicFuzzSpec();
#else
  static const std::shared_ptr<const ReductionSpec> spec = fuzz::FuzzSpec();
#endif
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<PartialAggregate> partial = PartialAggregate::Deserialize(spec, bytes);
  if (!partial.ok()) {
    const absl::StatusCode code = partial.status().code();
    FUZZ_CHECK(code == absl::StatusCode::kDataLoss || code == absl::StatusCode::kFailedPrecondition);
    return 0;
  }
  const absl::StatusOr<std::string> serialized = partial->Serialize();
  FUZZ_CHECK(serialized.ok());  // the CPU backend always serializes
  absl::StatusOr<PartialAggregate> again = PartialAggregate::Deserialize(spec, *serialized);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->Serialize() == serialized);
  PartialAggregate merged(spec);
  FUZZ_CHECK(merged.MergeWith(*partial).ok());
  FUZZ_CHECK(merged.contributions() == partial->contributions());
  (void)partial->Report();  // may refuse (nothing contributed); must not crash
  return 0;
}
