// The thrust-omp backend on simulated devices (the multi-device orchestration the cuda
// backend runs across GPUs, merged through the host) against the same backend on one
// device: byte-identical serialized state for every intrinsic and transport dtype on
// exact-arithmetic data, and Load (Deserialize) followed by more batches. Seeds are fresh
// on every run and printed with each failure; FEDAGG_CONFORMANCE_SEED replays one.
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "portable/omp_backend.h"
#include "service/backend/backend_check.h"
#include "service/core/reduction_spec.h"

namespace fedagg {
namespace {

uint64_t Seed() {
  if (const char* env = std::getenv("FEDAGG_CONFORMANCE_SEED"); env != nullptr && *env != '\0') {
    return std::strtoull(env, nullptr, 10);
  }
  std::random_device device;
  return (uint64_t{device()} << 32) | device();
}

TEST(MultiDeviceBackendTest, SeveralDevicesSerializeByteForByteAsOne) {
  const uint64_t seed = Seed();
  const std::vector<BackendCase> cases = AllBackendCases();
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < cases.size(); ++i) {
      const uint64_t case_seed = seed + round * 1000 + i;
      absl::StatusOr<std::string> one = SerializedCase(ThrustOmpBackend({}, 1), cases[i], case_seed);
      ASSERT_TRUE(one.ok()) << one.status();
      for (int devices : {2, 3}) {
        absl::StatusOr<std::string> several = SerializedCase(ThrustOmpBackend({}, devices), cases[i], case_seed);
        ASSERT_TRUE(several.ok()) << several.status();
        EXPECT_EQ(*several, *one) << IntrinsicName(cases[i].intrinsic) << " over " << DTypeName(cases[i].dtype)
                                  << " on " << devices << " devices (replay with FEDAGG_CONFORMANCE_SEED="
                                  << seed << ")";
      }
    }
  }
}

// Batches of one update each: update u sets 1.5 * (u + 1) at indices {u % rows, 3}.
void AddBatches(FieldAccumulator& accumulator, const FieldSpec& field, int first, int count) {
  for (int u = first; u < first + count; ++u) {
    const std::vector<int64_t> indices = {u % field.rows, 3};
    const size_t values = field.encoding == Encoding::kDense ? static_cast<size_t>(field.row_width)
                                                             : indices.size() * static_cast<size_t>(field.row_width);
    const std::vector<float> data(values, 1.5f * static_cast<float>(u + 1));
    const FieldValue value{field.encoding, DType::kFloat32,
                           field.encoding == Encoding::kDense ? absl::Span<const int64_t>() : absl::MakeConstSpan(indices),
                           AsBytes(absl::MakeConstSpan(data))};
    const FieldValue* batch[] = {&value};
    const double weights[] = {0.5 * (u + 1)};
    ASSERT_TRUE(accumulator.AccumulateBatch(batch, weights).ok());
  }
}

std::string Serialized(const FieldAccumulator& accumulator) {
  ByteWriter writer;
  EXPECT_TRUE(accumulator.SerializeTo(writer).ok());
  return writer.Take();
}

TEST(MultiDeviceBackendTest, LoadThenAccumulateOnSeveralDevicesMatchesOneDevice) {
  for (Intrinsic intrinsic : {Intrinsic::kFederatedWeightedMean, Intrinsic::kFederatedMax,
                              Intrinsic::kSparseWeightedMean, Intrinsic::kSparseSumSparse,
                              Intrinsic::kRowSparseMean}) {
    const std::vector<int64_t> shape = EncodingOf(intrinsic) == Encoding::kRowSparse ? std::vector<int64_t>{8, 2}
                                                                                      : std::vector<int64_t>{8};
    std::shared_ptr<const ReductionSpec> spec =
        *ReductionSpec::Create(ValueType::Tensor(DType::kFloat32, shape), {{intrinsic, IsSparseFamily(intrinsic)}});
    const FieldSpec& field = spec->fields()[0];
    std::unique_ptr<FieldAccumulator> before = ThrustOmpBackend({}, 1).Make(field);
    AddBatches(*before, field, 0, 4);
    const std::string loaded = Serialized(*before);
    std::string expected;
    for (int devices : {1, 3}) {
      std::unique_ptr<FieldAccumulator> accumulator = ThrustOmpBackend({}, devices).Make(field);
      AddBatches(*accumulator, field, 10, 2);  // replaced by the Load
      ByteReader reader(loaded);
      ASSERT_TRUE(accumulator->DeserializeFrom(reader, 4).ok());
      AddBatches(*accumulator, field, 4, 5);
      if (devices == 1) {
        expected = Serialized(*accumulator);
      } else {
        EXPECT_EQ(Serialized(*accumulator), expected) << IntrinsicName(intrinsic) << " on " << devices << " devices";
      }
    }
  }
}

}  // namespace
}  // namespace fedagg
