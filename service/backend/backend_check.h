// BackendCheck: runs one intrinsic on random updates through a backend and compares the
// outcome with the float64 reference reduction (reference_reducer.h) and with the CPU
// backend. Shared by the conformance tests (tests/backend) and fedagg-selftest.
//
// The updates are exact-arithmetic data: floats are multiples of 1/4 in [-8, 8], integers
// in [-1000, 1000], weights multiples of 1/8 in (0, 10], so every float32 / float64 sum is
// exact and only a final division rounds. The updates go into two partial aggregates in
// random batches; the second one travels through Serialize / Deserialize and is merged
// into the first. The check passes when the report is within 1e-6 (relative to
// max(1, |expected|)) of the reference with identical indices and counts, the serialized
// state is byte-identical to the CPU backend's on the same batches, and so is the result
// (a device backend divides and converts on the device, as the CPU backend's report does
// on the host).
#ifndef FEDAGG_SERVICE_BACKEND_BACKEND_CHECK_H_
#define FEDAGG_SERVICE_BACKEND_BACKEND_CHECK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "service/core/accumulator_factory.h"
#include "service/core/dtype.h"
#include "service/core/intrinsic.h"

namespace fedagg {

struct BackendCase {
  Intrinsic intrinsic;
  DType dtype;
};

// Every (intrinsic, transport dtype) pair a ReductionSpec accepts.
std::vector<BackendCase> AllBackendCases();

struct BackendCheckResult {
  bool passed = false;
  double max_relative_error = 0;  // against the reference (infinity: shapes/counts differ)
  std::string detail;             // what failed, empty when passed
};

BackendCheckResult CheckBackend(const AccumulatorFactory& backend, const BackendCase& test_case,
                                uint64_t seed);

// The serialized state CheckBackend compares, from the same updates, batches, split and
// merge for `seed`: for comparing two backends (or one backend on different devices)
// byte for byte.
absl::StatusOr<std::string> SerializedCase(const AccumulatorFactory& backend, const BackendCase& test_case,
                                           uint64_t seed);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_BACKEND_BACKEND_CHECK_H_
