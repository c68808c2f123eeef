// Federated intrinsics: names, encodings and properties.
#include "service/core/intrinsic.h"

#include "absl/strings/str_cat.h"

namespace fedagg {
namespace {
constexpr Intrinsic kAll[] = {
    Intrinsic::kFederatedSum,   Intrinsic::kFederatedMean,      Intrinsic::kFederatedWeightedMean,
    Intrinsic::kFederatedMax,   Intrinsic::kFederatedMin,       Intrinsic::kSparseSum,
    Intrinsic::kSparseSumSparse, Intrinsic::kSparseMean,        Intrinsic::kSparseWeightedMean,
    Intrinsic::kRowSparseSum,   Intrinsic::kRowSparseMean,
};
}  // namespace

Encoding EncodingOf(Intrinsic intrinsic) {
  switch (intrinsic) {
    case Intrinsic::kSparseSum:
    case Intrinsic::kSparseSumSparse:
    case Intrinsic::kSparseMean:
    case Intrinsic::kSparseWeightedMean:
      return Encoding::kSparse;
    case Intrinsic::kRowSparseSum:
    case Intrinsic::kRowSparseMean:
      return Encoding::kRowSparse;
    default:
      return Encoding::kDense;
  }
}

bool IsWeighted(Intrinsic intrinsic) {
  return intrinsic == Intrinsic::kFederatedWeightedMean ||
         intrinsic == Intrinsic::kSparseWeightedMean;
}

bool NeedsCoordinateCounts(Intrinsic intrinsic) {
  return intrinsic == Intrinsic::kSparseMean || intrinsic == Intrinsic::kSparseWeightedMean ||
         intrinsic == Intrinsic::kRowSparseMean || intrinsic == Intrinsic::kSparseSumSparse;
}

bool IsSparseFamily(Intrinsic intrinsic) { return EncodingOf(intrinsic) != Encoding::kDense; }

absl::string_view IntrinsicName(Intrinsic intrinsic) {
  switch (intrinsic) {
    case Intrinsic::kFederatedSum: return "federated_sum";
    case Intrinsic::kFederatedMean: return "federated_mean";
    case Intrinsic::kFederatedWeightedMean: return "federated_weighted_mean";
    case Intrinsic::kFederatedMax: return "federated_max";
    case Intrinsic::kFederatedMin: return "federated_min";
    case Intrinsic::kSparseSum: return "sparse_sum";
    case Intrinsic::kSparseSumSparse: return "sparse_sum_sparse";
    case Intrinsic::kSparseMean: return "sparse_mean";
    case Intrinsic::kSparseWeightedMean: return "sparse_weighted_mean";
    case Intrinsic::kRowSparseSum: return "row_sparse_sum";
    case Intrinsic::kRowSparseMean: return "row_sparse_mean";
  }
  return "invalid";
}

absl::StatusOr<Intrinsic> ParseIntrinsic(absl::string_view name) {
  for (Intrinsic intrinsic : kAll) {
    if (IntrinsicName(intrinsic) == name) return intrinsic;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown intrinsic '", name,
      "'; expected federated_sum, federated_mean, federated_weighted_mean, federated_max, "
      "federated_min, sparse_sum, sparse_sum_sparse, sparse_mean, sparse_weighted_mean, "
      "row_sparse_sum or row_sparse_mean"));
}

bool IsValidIntrinsic(uint8_t raw) { return raw >= 1 && raw <= 11; }

absl::string_view EncodingName(Encoding encoding) {
  switch (encoding) {
    case Encoding::kDense: return "dense";
    case Encoding::kSparse: return "sparse";
    case Encoding::kRowSparse: return "row-sparse";
  }
  return "invalid";
}

}  // namespace fedagg
