// Shared by fedagg's libFuzzer targets: the spec every target decodes against (one field
// of each encoding, a weighted one, finite values required) and FUZZ_CHECK, which aborts —
// so libFuzzer reports the input — when an invariant fails.
#ifndef FEDAGG_TESTS_FUZZ_FUZZ_SUPPORT_H_
#define FEDAGG_TESTS_FUZZ_FUZZ_SUPPORT_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "service/core/reduction_spec.h"
#include "service/core/value_type.h"

#define FUZZ_CHECK(condition)                                                        \
  do {                                                                               \
    if (!(condition)) {                                                              \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                  \
    }                                                                                \
  } while (false)

namespace fedagg::fuzz {

// A spec of four fields: "dense" [8], "sparse" [16], "rows" [4,2] and "union" [32], of the
// dtypes and intrinsics given.
inline std::shared_ptr<const ReductionSpec> FourFieldSpec(const DType (&dtypes)[4],
                                                         std::vector<FieldIntrinsic> intrinsics,
                                                         ReductionOptions options) {
  ValueType type = ValueType::Struct({
      {"dense", ValueType::Tensor(dtypes[0], {8})},
      {"sparse", ValueType::Tensor(dtypes[1], {16})},
      {"rows", ValueType::Tensor(dtypes[2], {4, 2})},
      {"union", ValueType::Tensor(dtypes[3], {32})},
  });
  absl::StatusOr<std::shared_ptr<const ReductionSpec>> spec =
      ReductionSpec::Create(std::move(type), std::move(intrinsics), options);
  FUZZ_CHECK(spec.ok());
  return *spec;
}

// dense float32[8] weighted mean, sparse float32[16] sparse_mean with counts, row-sparse
// float32[4,2] row_sparse_sum, sparse int32[32] sparse_sum_sparse; finite values required.
inline std::shared_ptr<const ReductionSpec> FuzzSpec() {
  return FourFieldSpec({DType::kFloat32, DType::kFloat32, DType::kFloat32, DType::kInt32},
                       {{Intrinsic::kFederatedWeightedMean}, {Intrinsic::kSparseMean, true},
                        {Intrinsic::kRowSparseSum}, {Intrinsic::kSparseSumSparse}},
                       ReductionOptions{.require_finite = true});
}

// FuzzSpec with encoded values (encoded_update_validation_fuzzer), for the encoded
// sections' checks and decoding: the dense field quantized (2 bits a coordinate, one block
// of 8: a float32 scale then 2 bytes of codes), the sparse one's values quantized (4 bits,
// blocks of 8) and the row-sparse one's discretized (8-bit steps of 0.5).
inline std::shared_ptr<const ReductionSpec> EncodedFuzzSpec() {
  return FourFieldSpec({DType::kFloat32, DType::kFloat32, DType::kFloat32, DType::kInt32},
                       {{Intrinsic::kFederatedWeightedMean, false, ValueEncoding::Quantized(2, 8)},
                        {Intrinsic::kSparseMean, true, ValueEncoding::Quantized(4, 8)},
                        {Intrinsic::kRowSparseSum, false, ValueEncoding::Discretized(8, 0.5)},
                        {Intrinsic::kSparseSumSparse}},
                       ReductionOptions{.require_finite = true});
}

// The partial-aggregate decoder's other layout (format version 2): a deterministic
// aggregation with an exact sum of every kind — dense float32[8] weighted mean, sparse
// float32[16] sparse_weighted_mean with counts (exact weight sums), row-sparse
// float64[4,2] row_sparse_sum, sparse float32[32] sparse_sum_sparse.
inline std::shared_ptr<const ReductionSpec> DeterministicFuzzSpec() {
  return FourFieldSpec({DType::kFloat32, DType::kFloat32, DType::kFloat64, DType::kFloat32},
                       {{Intrinsic::kFederatedWeightedMean}, {Intrinsic::kSparseWeightedMean, true},
                        {Intrinsic::kRowSparseSum}, {Intrinsic::kSparseSumSparse}},
                       ReductionOptions{.deterministic = true});
}

// Reads a fuzz input front to back (zeros once it is exhausted), so that a seed can be
// written as the sequence of choices it makes (tests/fuzz/make_corpus.cc does).
class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return position_ >= size_; }
  uint8_t Byte() { return empty() ? 0 : data_[position_++]; }
  // One of 0 .. n-1 (n <= 256).
  int Pick(int n) { return n <= 1 ? 0 : Byte() % n; }
  bool Bool() { return (Byte() & 1) != 0; }
  template <typename T>
  T Raw() {
    unsigned char bytes[sizeof(T)] = {};
    for (unsigned char& byte : bytes) byte = Byte();
    T value;
    std::memcpy(&value, bytes, sizeof(T));
    return value;
  }
  std::string Bytes(size_t n) {
    std::string bytes;
    while (bytes.size() < n && !empty()) bytes.push_back(static_cast<char>(Byte()));
    return bytes;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t position_ = 0;
};

}  // namespace fedagg::fuzz

#endif  // FEDAGG_TESTS_FUZZ_FUZZ_SUPPORT_H_
