// Federated intrinsics: how one tensor field of an update is reduced across clients,
// and the wire encoding each one implies (dense, sparse COO, or row-sparse).
#ifndef FEDAGG_SERVICE_CORE_INTRINSIC_H_
#define FEDAGG_SERVICE_CORE_INTRINSIC_H_

#include <cstdint>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace fedagg {

enum class Intrinsic : uint8_t {
  kFederatedSum = 1,
  kFederatedMean = 2,
  kFederatedWeightedMean = 3,
  kFederatedMax = 4,
  kFederatedMin = 5,
  kSparseSum = 6,            // COO in, dense sum out
  kSparseSumSparse = 7,      // COO in, coalesced sorted COO out
  kSparseMean = 8,           // COO in, dense per-coordinate mean out
  kSparseWeightedMean = 9,   // COO in, dense per-coordinate weighted mean out
  kRowSparseSum = 10,        // row ids + rows in, dense [R, ...] sum out
  kRowSparseMean = 11,       // row ids + rows in, dense per-row mean out
};

// How a client encodes a field that uses a given intrinsic.
enum class Encoding : uint8_t {
  kDense = 1,
  kSparse = 2,     // int64 linear indices into the flattened tensor + one value each
  kRowSparse = 3,  // int64 row ids into dimension 0 + one full row each
};

Encoding EncodingOf(Intrinsic intrinsic);
// Whether the update's weight multiplies its values for this intrinsic.
bool IsWeighted(Intrinsic intrinsic);
// Whether this intrinsic keeps per-coordinate (or per-row) contributor counts anyway.
bool NeedsCoordinateCounts(Intrinsic intrinsic);
bool IsSparseFamily(Intrinsic intrinsic);

absl::string_view IntrinsicName(Intrinsic intrinsic);  // "federated_mean", "sparse_sum", ...
absl::StatusOr<Intrinsic> ParseIntrinsic(absl::string_view name);
bool IsValidIntrinsic(uint8_t raw);
absl::string_view EncodingName(Encoding encoding);

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_INTRINSIC_H_
