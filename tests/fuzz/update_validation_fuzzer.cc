// Fuzz target: sparse (COO), row-sparse and dense field values built from arbitrary
// bytes — indices, values (NaN and Inf included), dtypes, encodings, weight — through
// ValidateUpdate and PartialAggregate::Accumulate. Invariants: Accumulate accepts exactly
// what the validator accepts; a refused update leaves the partial aggregate byte-for-byte
// as it was; an accepted one is counted once and the aggregate still reports. Built a
// second time as encoded_update_validation_fuzzer (FEDAGG_FUZZ_ENCODED), against a spec
// whose dense field is quantized and whose sparse and row-sparse fields' values are
// encoded: the encoded sections' size and scale checks, and their decoding as they are added.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "service/core/partial_aggregate.h"
#include "service/core/update_validator.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fedagg;
#if FEDAGG_FUZZ_ENCODED
  static const std::shared_ptr<const ReductionSpec> spec = fuzz::EncodedFuzzSpec();
  // The dense field's good value: scale 1.5, then the 2-bit codes 0, 1, 2, 3, 3, 2, 1, 0;
  // the sparse one's: scale 2, code 15 (2.0); the row-sparse one's row: steps 2 and 4.
  const std::vector<uint8_t> dense = {0x00, 0x00, 0xC0, 0x3F, 0xE4, 0x1B};
  const std::vector<uint8_t> sparse = {0x00, 0x00, 0x00, 0x40, 0x0F}, rows = {0x02, 0x04};
#else
  static const std::shared_ptr<const ReductionSpec> spec = fuzz::FuzzSpec();
  const std::vector<float> dense(8, 1.0f), sparse = {2.0f}, rows = {1.0f, 2.0f};
#endif
  FuzzedDataProvider input(data, size);

  // A good update first, so that a refusal has state to leave unchanged.
  PartialAggregate partial(spec);
  {
    const std::vector<int32_t> ints = {7};
    const std::vector<int64_t> index = {3};
    UpdateView good{{FieldValue{Encoding::kDense, DType::kFloat32, {}, AsBytes(absl::MakeConstSpan(dense))},
                     FieldValue{Encoding::kSparse, DType::kFloat32, index, AsBytes(absl::MakeConstSpan(sparse))},
                     FieldValue{Encoding::kRowSparse, DType::kFloat32, index, AsBytes(absl::MakeConstSpan(rows))},
                     FieldValue::Sparse<int32_t>(index, ints)},
                    1.0};
    FUZZ_CHECK(partial.Accumulate(good).ok());
  }

  // Storage outlives the views; values are 8-byte aligned unless the input asks otherwise.
  const size_t num_fields = input.ConsumeIntegralInRange<size_t>(0, 5);
  std::vector<std::vector<int64_t>> indices(num_fields);
  std::vector<std::vector<uint64_t>> values(num_fields);
  UpdateView update;
  for (size_t f = 0; f < num_fields; ++f) {
    const FieldSpec* declared = f < spec->fields().size() ? &spec->fields()[f] : nullptr;
    FieldValue value;
    value.encoding = declared != nullptr && input.ConsumeBool() ? declared->encoding
                                                                : static_cast<Encoding>(input.ConsumeIntegralInRange<int>(1, 3));
    value.dtype = declared != nullptr && input.ConsumeBool() ? declared->type.dtype
                                                             : static_cast<DType>(input.ConsumeIntegralInRange<int>(1, 6));
    const size_t nnz = input.ConsumeIntegralInRange<size_t>(0, 40);
    for (size_t i = 0; i < nnz && value.encoding != Encoding::kDense; ++i) {
      indices[f].push_back(input.ConsumeBool() ? input.ConsumeIntegralInRange<int64_t>(-2, 40)
                                               : input.ConsumeIntegral<int64_t>());
    }
    const size_t value_bytes = input.ConsumeIntegralInRange<size_t>(0, 512);
    const std::vector<uint8_t> bytes = input.ConsumeBytes<uint8_t>(value_bytes);
    values[f].resize((bytes.size() + 15) / 8);
    const size_t misalign = input.ConsumeIntegralInRange<size_t>(0, 1) * 2;
    std::byte* base = reinterpret_cast<std::byte*>(values[f].data()) + misalign;
    if (!bytes.empty()) std::memcpy(base, bytes.data(), bytes.size());
    value.indices = indices[f];
    value.values = absl::MakeConstSpan(base, bytes.size());
    update.fields.push_back(value);
  }
  if (input.ConsumeBool()) update.weight = input.ConsumeFloatingPoint<double>();

  const absl::StatusOr<std::string> before = partial.Serialize();
  FUZZ_CHECK(before.ok());  // the CPU backend always serializes
  const absl::Status valid = ValidateUpdate(*spec, update);
  const absl::Status accumulated = partial.Accumulate(update);
  FUZZ_CHECK(valid.ok() == accumulated.ok());
  if (!accumulated.ok()) {
    FUZZ_CHECK(partial.Serialize() == before);
    FUZZ_CHECK(partial.contributions() == 1);
    return 0;
  }
  FUZZ_CHECK(partial.contributions() == 2);
  FUZZ_CHECK(partial.Report().ok());
  return 0;
}
