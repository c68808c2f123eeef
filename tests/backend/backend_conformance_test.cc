// The conformance suite, typed over backends: every intrinsic and transport dtype on
// random exact-arithmetic updates (service/backend/backend_check.h), against the float64
// reference and the CPU backend; plus what a device backend must do on its own (fail on
// out-of-range indices without scattering them, and never serialize such a batch).
// Built twice: with the cpu and thrust-omp backends (label thrust; thrust-omp also on 2
// and 3 simulated devices, the multi-device orchestration merged through the host), and
// with the cuda backend (label cuda: device 0, and every device merged with NCCL), whose
// cases skip themselves, saying why, without a device (or without a second one).
// Seeds are fresh on every run and printed with each failure; FEDAGG_CONFORMANCE_SEED
// replays one.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "service/backend/backend_check.h"
#include "service/core/cpu_accumulator_factory.h"
#include "service/core/partial_aggregate.h"
#include "service/core/reference_reducer.h"
#include "service/core/value_encoder.h"
#include "tests/core/core_test_util.h"
#if FEDAGG_CONFORMANCE_CUDA
#include "cuda/cuda_backend.h"
#include "cuda/device_probe.h"
#else
#include "portable/omp_backend.h"
#endif

namespace fedagg {
namespace {

#if FEDAGG_CONFORMANCE_CUDA
struct CudaUnderTest {
  static absl::StatusOr<const AccumulatorFactory*> Get() {
    return cuda::CudaBackend(CpuAccumulatorFactory::Default(), {}, std::vector<int>{0});
  }
};
// Device 1 alone (reducers bound to a device other than the thread's default), or every
// device (batches spread, summed with NCCL): both need a second device.
template <bool kAllDevices>
struct CudaSeveralDevicesUnderTest {
  static absl::StatusOr<const AccumulatorFactory*> Get() {
    absl::StatusOr<int> devices = cuda::UsableDeviceCount();
    if (devices.ok() && *devices < 2) {
      return absl::UnavailableError(absl::StrCat("needs two or more CUDA devices, found ", *devices));
    }
    const AccumulatorFactory& host = CpuAccumulatorFactory::Default();
    return kAllDevices ? cuda::CudaBackend(host) : cuda::CudaBackend(host, {}, std::vector<int>{1});
  }
};
using BackendsUnderTest =
    ::testing::Types<CudaUnderTest, CudaSeveralDevicesUnderTest<false>, CudaSeveralDevicesUnderTest<true>>;
#else
struct CpuUnderTest {
  static absl::StatusOr<const AccumulatorFactory*> Get() { return &CpuAccumulatorFactory::Default(); }
};
template <int kDevices>
struct ThrustOmpUnderTest {
  static absl::StatusOr<const AccumulatorFactory*> Get() { return &ThrustOmpBackend({}, kDevices); }
};
// Staging slots so small that every batch goes in parts: dense batches cut by rows and
// columns (a float64 row of the dense case, 2,680 bytes, does not fit one), sparse updates
// cut between runs of one index (a slot holds three float64 rows of the row-sparse case's
// table; portable/batch_packer.h).
struct ThrustOmpTinySlotsUnderTest {
  static absl::StatusOr<const AccumulatorFactory*> Get() {
    portable::StagingRingOptions staging;
    staging.slots = 2;
    staging.slot_bytes = 3072;
    return &ThrustOmpBackend(staging);
  }
};
using BackendsUnderTest = ::testing::Types<CpuUnderTest, ThrustOmpUnderTest<1>, ThrustOmpUnderTest<2>,
                                           ThrustOmpUnderTest<3>, ThrustOmpTinySlotsUnderTest>;
#endif

uint64_t Seed() {
  if (const char* env = std::getenv("FEDAGG_CONFORMANCE_SEED"); env != nullptr && *env != '\0') {
    return std::strtoull(env, nullptr, 10);
  }
  std::random_device device;
  return (uint64_t{device()} << 32) | device();
}

template <typename T>
class BackendConformanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<const AccumulatorFactory*> backend = T::Get();
    if (!backend.ok()) GTEST_SKIP() << "backend not available here: " << backend.status().message();
    backend_ = *backend;
  }
  const AccumulatorFactory* backend_ = nullptr;
};
TYPED_TEST_SUITE(BackendConformanceTest, BackendsUnderTest);

TYPED_TEST(BackendConformanceTest, EveryIntrinsicAndDTypeMatchesReferenceAndCpu) {
  const uint64_t seed = Seed();
  const std::vector<BackendCase> cases = AllBackendCases();
  ASSERT_GE(cases.size(), 40u) << "the case list lost intrinsics or dtypes";
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < cases.size(); ++i) {
      const uint64_t case_seed = seed + round * 1000 + i;
      const BackendCheckResult result = CheckBackend(*this->backend_, cases[i], case_seed);
      EXPECT_TRUE(result.passed) << this->backend_->name() << ": "
                                 << IntrinsicName(cases[i].intrinsic) << " over "
                                 << DTypeName(cases[i].dtype) << ": " << result.detail
                                 << " (replay with FEDAGG_CONFORMANCE_SEED=" << seed << ")";
    }
  }
}

// An accumulator straight from the backend (no validator in front): an index outside the
// field is found on the device, before the part of the batch that holds it adds anything
// (tests/portable/thrust_field_reducer_test.cc), and fails the accumulator with
// INVALID_ARGUMENT — at that call or, as reductions finish after it, the next — so no
// state holding part of that batch is ever serialized. The CPU backend trusts validated
// input instead, so this is for the portable backends only.
TYPED_TEST(BackendConformanceTest, DeviceBackendsFailOnOutOfRangeIndicesAndNeverSerializeThem) {
  if (this->backend_->name() == "cpu") GTEST_SKIP() << "the CPU backend trusts validated input";
  for (Intrinsic intrinsic : {Intrinsic::kSparseSum, Intrinsic::kSparseSumSparse, Intrinsic::kRowSparseMean}) {
    std::shared_ptr<const ReductionSpec> spec =
        *ReductionSpec::Create(ValueType::Tensor(DType::kFloat32, {8, 2}), {{intrinsic, true}});
    const FieldSpec& field = spec->fields()[0];
    std::unique_ptr<FieldAccumulator> accumulator = this->backend_->Make(field);
    const int64_t width = field.row_width;
    const std::vector<int64_t> good = {1, 3};
    const std::vector<int64_t> bad = {2, field.rows};  // one past the end
    const std::vector<float> values(static_cast<size_t>(2 * width), 1.5f);
    const FieldValue good_value = FieldValue{field.encoding, DType::kFloat32, absl::MakeConstSpan(good),
                                             AsBytes(absl::MakeConstSpan(values))};
    const FieldValue bad_value = FieldValue{field.encoding, DType::kFloat32, absl::MakeConstSpan(bad),
                                            AsBytes(absl::MakeConstSpan(values))};
    const double weights[2] = {1.0, 1.0};
    const FieldValue* first[] = {&good_value};
    ASSERT_TRUE(accumulator->AccumulateBatch(first, absl::MakeConstSpan(weights, 1)).ok());
    ByteWriter before;
    ASSERT_TRUE(accumulator->SerializeTo(before).ok());  // the good batch alone is sound
    const FieldValue* batch[] = {&good_value, &bad_value};
    const absl::Status added = accumulator->AccumulateBatch(batch, weights);
    EXPECT_TRUE(added.ok() || added.code() == absl::StatusCode::kInvalidArgument) << added;
    ByteWriter after;
    const absl::Status serialized = accumulator->SerializeTo(after);
    EXPECT_EQ(serialized.code(), absl::StatusCode::kInvalidArgument)
        << IntrinsicName(intrinsic) << ": a state holding part of the refused batch was serialized: " << serialized;
    EXPECT_NE(serialized.message().find(absl::StrCat("outside the field's ", field.rows, " rows")), std::string::npos)
        << serialized;
  }
}

// A deterministic aggregation's fields are summed exactly on every backend: its state and
// result are the cpu backend's to the bit, even with the updates in another order and
// other batches.
TYPED_TEST(BackendConformanceTest, DeterministicAggregationsMatchTheCpuBackendToTheBit) {
  using ::fedagg::testing::Update;
  std::shared_ptr<const ReductionSpec> spec = *ReductionSpec::Create(
      ValueType::Struct({{"dense", ValueType::Tensor(DType::kFloat32, {3000})},
                         {"coo", ValueType::Tensor(DType::kFloat32, {5000})},
                         {"rows", ValueType::Tensor(DType::kFloat64, {40, 3})}}),
      {{Intrinsic::kFederatedWeightedMean}, {Intrinsic::kSparseSum, true}, {Intrinsic::kRowSparseMean, true}},
      ReductionOptions{.deterministic = true});
  std::mt19937_64 random(Seed());
  std::uniform_real_distribution<double> mantissa(-1, 1);
  auto value = [&] { return std::ldexp(mantissa(random), static_cast<int>(random() % 40) - 20); };
  std::vector<Update> updates(24);
  for (Update& update : updates) {
    std::vector<float> dense(3000), coo(7);
    std::vector<double> rows(9);
    std::vector<int64_t> coo_ids(7), row_ids(3);
    for (float& x : dense) x = static_cast<float>(value());
    for (size_t k = 0; k < coo.size(); ++k) coo_ids[k] = static_cast<int64_t>(random() % 5000), coo[k] = static_cast<float>(value());
    for (int64_t& id : row_ids) id = static_cast<int64_t>(random() % 40);
    for (double& x : rows) x = value();
    update.Dense(dense).Sparse(coo_ids, coo).RowSparse(row_ids, rows).Weight(1 + static_cast<double>(random() % 100) / 3);
  }
  std::vector<UpdateView> views = ::fedagg::testing::Views(updates);
  PartialAggregate on_backend(spec, *this->backend_);
  for (size_t begin = 0; begin < views.size(); begin += 5) {
    ASSERT_TRUE(on_backend.AccumulateBatch(absl::MakeConstSpan(views).subspan(begin, 5)).ok());
  }
  std::reverse(views.begin(), views.end());
  PartialAggregate on_cpu(spec);
  ASSERT_TRUE(on_cpu.AccumulateBatch(views).ok());
  EXPECT_EQ(*on_backend.Serialize(), *on_cpu.Serialize());
  const AggregateResult mine = *on_backend.Report(), cpu = *on_cpu.Report();
  EXPECT_EQ(mine.weight_sum, cpu.weight_sum);
  for (size_t f = 0; f < mine.fields.size(); ++f) {
    EXPECT_EQ(mine.fields[f].value.bytes, cpu.fields[f].value.bytes) << mine.fields[f].path;
    EXPECT_EQ(mine.fields[f].counts, cpu.fields[f].counts) << mine.fields[f].path;
  }
}

// `count` standard normal values (as float32) written in `encoding`, rounding with a
// random stream.
std::vector<std::byte> RandomEncodedValues(const ValueEncoding& encoding, int64_t count, std::mt19937_64& random) {
  std::normal_distribution<double> normal(0, 1);
  std::vector<float> plain(static_cast<size_t>(count));
  for (float& x : plain) x = static_cast<float>(normal(random));
  std::vector<std::byte> bytes(encoding.EncodedBytes(count));
  EXPECT_TRUE(EncodeValues(encoding, DType::kFloat32, AsBytes(absl::MakeConstSpan(plain)), random(),
                           absl::MakeSpan(bytes)).ok());
  return bytes;
}

// The reports of `views` reduced on `backend` and on the cpu backend, in batches of 4,
// and of the backend's partial serialized and merged on the cpu backend (a tree).
struct ThreeReports {
  AggregateResult backend, cpu, merged;
};
void ReportThreeWays(const std::shared_ptr<const ReductionSpec>& spec, const std::vector<UpdateView>& views,
                     const AccumulatorFactory& backend, ThreeReports* out) {
  PartialAggregate on_backend(spec, backend), on_cpu(spec);
  for (size_t begin = 0; begin < views.size(); begin += 4) {
    const auto batch = absl::MakeConstSpan(views).subspan(begin, std::min<size_t>(4, views.size() - begin));
    ASSERT_TRUE(on_backend.AccumulateBatch(batch).ok());
    ASSERT_TRUE(on_cpu.AccumulateBatch(batch).ok());
  }
  absl::StatusOr<std::string> partial = on_backend.Serialize();
  ASSERT_TRUE(partial.ok()) << partial.status();
  absl::StatusOr<PartialAggregate> tree = PartialAggregate::Deserialize(spec, *partial);
  ASSERT_TRUE(tree.ok()) << tree.status();
  absl::StatusOr<AggregateResult> backend_report = on_backend.Report(), cpu_report = on_cpu.Report(),
                                  merged_report = tree->Report();
  ASSERT_TRUE(backend_report.ok() && cpu_report.ok() && merged_report.ok());
  *out = ThreeReports{*std::move(backend_report), *std::move(cpu_report), *std::move(merged_report)};
}

// Encoded fields (service/core/value_encoding.h) on every backend: quantized values (1, 2,
// 4 and 8 bits; blocks of 8 and of 256; a width that is no whole number of blocks, which
// tiny slots cut into column ranges; rotated ones) decoded as they are added, and
// discretized integers (8, 16 and 32 bits) summed exactly; each result against the float64 reference decoder
// and the cpu backend, and through a partial serialized on the backend and merged on the
// cpu backend (a tree), whose report (rotated back on the host) has the backend's bits.
TYPED_TEST(BackendConformanceTest, EncodedFieldsMatchTheReferenceDecoderAndTheCpuBackend) {
  using ::fedagg::testing::Update;
  const uint64_t seed = Seed();
  std::mt19937_64 random(seed);
  constexpr int64_t kWidth = 3000;
  std::vector<ValueEncoding> encodings;
  for (int bits : {1, 2, 4, 8}) {
    for (int64_t block : {8, 256}) encodings.push_back(ValueEncoding::Quantized(bits, block));
  }
  // Rotated in runs of 64 and of 1,024 (2 whole runs and a short last one): the result is
  // rotated back once, on the device with a portable backend, to the host's bits.
  encodings.push_back(ValueEncoding::Quantized(4, 256, 64, 0xC0FFEE));
  encodings.push_back(ValueEncoding::Quantized(8, 64, 1024, 77));
  // Discretized steps of every width, summed as integers (on the device with a portable
  // backend), their result the cpu backend's to the bit; in float32 and float64 fields.
  for (int bits : {8, 16, 32}) encodings.push_back(ValueEncoding::Discretized(bits, bits == 8 ? 0.05 : 0.001));
  for (const ValueEncoding& encoding : encodings) {
    for (Intrinsic intrinsic : {Intrinsic::kFederatedSum, Intrinsic::kFederatedMean, Intrinsic::kFederatedWeightedMean}) {
      if (encoding.discretized() && intrinsic == Intrinsic::kFederatedWeightedMean) continue;
      const DType dtype = encoding.discretized() && encoding.bits != 16 ? DType::kFloat64 : DType::kFloat32;
      SCOPED_TRACE(absl::StrCat(encoding.ToString(), " ", IntrinsicName(intrinsic), " ", DTypeName(dtype),
                                " (replay with FEDAGG_CONFORMANCE_SEED=", seed, ")"));
      std::shared_ptr<const ReductionSpec> spec = *ReductionSpec::Create(
          ValueType::Tensor(dtype, {kWidth}), {FieldIntrinsic{intrinsic, false, encoding}});
      std::vector<Update> updates(9);
      for (size_t u = 0; u < updates.size(); ++u) {
        updates[u].Raw(Encoding::kDense, dtype, {}, RandomEncodedValues(encoding, kWidth, random));
        if (IsWeighted(intrinsic)) updates[u].Weight(0.5 + static_cast<double>(u));
      }
      const std::vector<UpdateView> views = ::fedagg::testing::Views(updates);
      const std::vector<ReferenceField> reference = ReferenceReduce(*spec, views);
      ThreeReports reports;
      ASSERT_NO_FATAL_FAILURE(ReportThreeWays(spec, views, *this->backend_, &reports));
      const AggregateResult &mine = reports.backend, &cpu = reports.cpu, &merged = reports.merged;
      ASSERT_EQ(mine.fields[0].value.dtype, dtype);
      for (size_t i = 0; i < static_cast<size_t>(kWidth); ++i) {
        const double expected = reference[0].values[i];
        // Decoded in float32, each code's value is off by roundings that share a sign (the
        // step 2 / (2^b - 1) is rounded once); rotating back adds a run's worth of them
        // into its first coordinate: up to sqrt(R) times one's, against the float64 reference.
        const double rotation_slack = encoding.rotated() ? std::sqrt(static_cast<double>(encoding.rotation)) : 1.0;
        const double tolerance = 1e-5 * rotation_slack * (1 + std::abs(expected));
        ASSERT_NEAR(mine.fields[0].value.ValueAsDouble(i), expected, tolerance) << "coordinate " << i;
        ASSERT_NEAR(mine.fields[0].value.ValueAsDouble(i), cpu.fields[0].value.ValueAsDouble(i), tolerance) << i;
        ASSERT_EQ(merged.fields[0].value.ValueAsDouble(i), mine.fields[0].value.ValueAsDouble(i)) << i;
      }
      if (encoding.discretized()) {
        EXPECT_EQ(mine.fields[0].value.bytes, cpu.fields[0].value.bytes);
      }
    }
  }
}

// A secure aggregation's sums (its masked inputs look uniform over all 2^b integers, so
// their int64 sum leaves b bits): every backend reports the low b bits of the exact sum,
// read as a signed integer, times the scale — what the root's unmasked sum needs — the
// cpu backend's bytes to the bit, through a partial merged on the cpu backend too.
TYPED_TEST(BackendConformanceTest, SecureSumsReportTheirLowBitsAsSignedIntegers) {
  using ::fedagg::testing::Update;
  const uint64_t seed = Seed();
  std::mt19937_64 random(seed);
  constexpr int64_t kWidth = 1000;
  for (int bits : {8, 16, 32}) {
    for (Intrinsic intrinsic : {Intrinsic::kFederatedSum, Intrinsic::kFederatedMean}) {
      SCOPED_TRACE(absl::StrCat(bits, " bits ", IntrinsicName(intrinsic), " (replay with FEDAGG_CONFORMANCE_SEED=",
                                seed, ")"));
      const double step = 0.25;
      std::shared_ptr<const ReductionSpec> spec = *ReductionSpec::Create(
          ValueType::Tensor(DType::kFloat64, {kWidth}),
          {FieldIntrinsic{intrinsic, false, ValueEncoding::Discretized(bits, step)}}, ReductionOptions{.secure = true});
      const size_t width = static_cast<size_t>(bits / 8);
      std::vector<Update> updates(9);
      std::vector<int64_t> sums(kWidth, 0);
      for (Update& update : updates) {
        std::vector<std::byte> bytes(static_cast<size_t>(kWidth) * width);
        for (int64_t i = 0; i < kWidth; ++i) {
          const uint32_t word = static_cast<uint32_t>(random());
          std::memcpy(bytes.data() + static_cast<size_t>(i) * width, &word, width);
          int64_t value = 0;  // the b-bit two's-complement integer the bytes hold
          if (bits == 8) value = static_cast<int8_t>(word);
          if (bits == 16) value = static_cast<int16_t>(word);
          if (bits == 32) value = static_cast<int32_t>(word);
          sums[static_cast<size_t>(i)] += value;
        }
        update.Raw(Encoding::kDense, DType::kFloat64, {}, std::move(bytes));
      }
      ThreeReports reports;
      ASSERT_NO_FATAL_FAILURE(ReportThreeWays(spec, ::fedagg::testing::Views(updates), *this->backend_, &reports));
      const double divisor = intrinsic == Intrinsic::kFederatedMean ? 9.0 : 1.0;
      const int shift = 64 - bits;
      for (size_t i = 0; i < static_cast<size_t>(kWidth); ++i) {
        const int64_t low = static_cast<int64_t>(static_cast<uint64_t>(sums[i]) << shift) >> shift;
        ASSERT_EQ(reports.backend.fields[0].value.ValueAsDouble(i), static_cast<double>(low) * step / divisor)
            << "coordinate " << i << " (exact sum " << sums[i] << ")";
      }
      EXPECT_EQ(reports.backend.fields[0].value.bytes, reports.cpu.fields[0].value.bytes);
      EXPECT_EQ(reports.merged.fields[0].value.bytes, reports.cpu.fields[0].value.bytes);
    }
  }
}

// The sparse family's encoded values on every backend (decoding_field_accumulator.h):
// quantized (blocks that cross entries and rows; a rotation over the values) and
// discretized, for every sparse intrinsic, with repeated and unsorted indices; each
// result, its indices and counts against the float64 reference decoder and the cpu
// backend, and through a partial serialized on the backend and merged on the cpu backend.
// A discretized field's integers sum exactly: its result equals the cpu backend's to the bit.
TYPED_TEST(BackendConformanceTest, EncodedSparseValuesMatchTheReferenceDecoderAndTheCpuBackend) {
  using ::fedagg::testing::Update;
  const uint64_t seed = Seed();
  std::mt19937_64 random(seed);
  constexpr int64_t kRows = 40, kWidth = 3;
  const std::vector<ValueEncoding> encodings = {ValueEncoding::Quantized(8, 8), ValueEncoding::Quantized(2),
                                                ValueEncoding::Quantized(4, 8, 16, 0x5EED),
                                                ValueEncoding::Discretized(16, 0.01)};
  for (const ValueEncoding& encoding : encodings) {
    for (Intrinsic intrinsic : {Intrinsic::kSparseSum, Intrinsic::kSparseSumSparse, Intrinsic::kSparseMean,
                                Intrinsic::kSparseWeightedMean, Intrinsic::kRowSparseSum, Intrinsic::kRowSparseMean}) {
      if (encoding.discretized() && IsWeighted(intrinsic)) continue;
      SCOPED_TRACE(absl::StrCat(encoding.ToString(), " ", IntrinsicName(intrinsic), " (replay with FEDAGG_CONFORMANCE_SEED=",
                                seed, ")"));
      std::shared_ptr<const ReductionSpec> spec = *ReductionSpec::Create(
          ValueType::Tensor(DType::kFloat32, {kRows, kWidth}), {FieldIntrinsic{intrinsic, true, encoding}});
      const FieldSpec& field = spec->fields()[0];
      std::vector<Update> updates(9);
      for (size_t u = 0; u < updates.size(); ++u) {
        const int64_t entries = static_cast<int64_t>(random() % 30);  // some updates hold none
        std::vector<int64_t> indices(static_cast<size_t>(entries));
        for (int64_t& index : indices) index = static_cast<int64_t>(random() % static_cast<uint64_t>(field.rows));
        if (u % 2 == 0) std::sort(indices.begin(), indices.end());
        updates[u].Raw(field.encoding, DType::kFloat32, std::move(indices),
                       RandomEncodedValues(encoding, entries * field.row_width, random));
        if (IsWeighted(intrinsic)) updates[u].Weight(0.5 + static_cast<double>(u));
      }
      const std::vector<UpdateView> views = ::fedagg::testing::Views(updates);
      const std::vector<ReferenceField> reference = ReferenceReduce(*spec, views);
      ThreeReports reports;
      ASSERT_NO_FATAL_FAILURE(ReportThreeWays(spec, views, *this->backend_, &reports));
      const AggregateResult &mine = reports.backend, &cpu = reports.cpu, &merged = reports.merged;
      ASSERT_EQ(mine.fields[0].value.dtype, DType::kFloat32);
      EXPECT_EQ(mine.fields[0].indices, reference[0].indices);
      EXPECT_EQ(mine.fields[0].counts, cpu.fields[0].counts);
      EXPECT_EQ(merged.fields[0].counts, cpu.fields[0].counts);
      EXPECT_LE(MaxRelativeError(reference, mine), 1e-5);
      EXPECT_LE(MaxRelativeError(reference, cpu), 1e-5);
      EXPECT_EQ(merged.fields[0].value.bytes, mine.fields[0].value.bytes);
      if (encoding.discretized()) {
        EXPECT_EQ(mine.fields[0].value.bytes, cpu.fields[0].value.bytes);
      }
    }
  }
}

// Two backends' partials do not mix: merging says why instead of misreading state.
TYPED_TEST(BackendConformanceTest, MergingAnotherBackendsPartialIsRefused) {
  if (this->backend_->name() == "cpu") GTEST_SKIP() << "compares against the cpu backend";
  std::shared_ptr<const ReductionSpec> spec =
      *ReductionSpec::Create(ValueType::Tensor(DType::kFloat32, {4}), {{Intrinsic::kFederatedSum, false}});
  PartialAggregate mine(spec, *this->backend_), cpu(spec);
  const absl::Status merged = mine.MergeWith(cpu);
  EXPECT_EQ(merged.code(), absl::StatusCode::kFailedPrecondition) << merged;
}

}  // namespace
}  // namespace fedagg
