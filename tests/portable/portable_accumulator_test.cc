// PortableAccumulatorFactory's adapter, over a fake reducer: a dense or scatter field's
// report asks the reducer for the result, divided as the CPU backend's report divides
// (DivisionOf), written straight into the result (and its counts), with no host copy of
// the state; sparse_sum_sparse's is made from a host copy of the state. What runs on the
// host's cores (exact sums, the checks of partials) is the host backend's the factory is
// given.
#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "portable/portable_accumulator_factory.h"
#include "service/core/cpu_accumulator_factory.h"
#include "tests/core/core_test_util.h"

namespace fedagg {
namespace {

using ::fedagg::testing::OneFieldSpec;
using portable::FieldReducer;
using portable::HostBatch;
using portable::HostState;
using portable::Outcome;
using portable::ReducerMakers;
using portable::ReducerSpec;
using portable::ResultRequest;
using Divide = portable::ResultRequest::Divide;

struct Calls {
  int saves = 0;                          // whole states copied out
  std::optional<ResultRequest> request;  // the last result asked for
};

// A reducer whose state is fixed: values 1, 2, 3, ... and per-row counts 10, 20, ...;
// its "result" is those values as they are, whatever the division asked (the division
// itself is the Thrust reducer's, held to the CPU backend's bit for bit by backend_check).
template <typename Acc>
class FixedStateReducer final : public FieldReducer<Acc> {
 public:
  FixedStateReducer(const ReducerSpec& spec, Calls* calls)
      : values_(static_cast<size_t>(spec.rows * spec.row_width)), counts_(static_cast<size_t>(spec.rows)), calls_(calls) {
    for (size_t i = 0; i < values_.size(); ++i) values_[i] = static_cast<Acc>(i + 1);
    for (size_t r = 0; r < counts_.size(); ++r) counts_[r] = static_cast<int64_t>(10 * (r + 1));
  }

  Outcome Accumulate(const HostBatch&) override { return Outcome{}; }
  Outcome Merge(const FieldReducer<Acc>&) override { return Outcome{}; }
  Outcome Save(HostState<Acc>* out) const override {
    ++calls_->saves;
    out->values = values_;
    out->indices.resize(values_.size());
    for (size_t i = 0; i < values_.size(); ++i) out->indices[i] = static_cast<int64_t>(i);
    out->counts.assign(values_.size(), 1);
    return Outcome{};
  }
  Outcome SaveResult(const ResultRequest& request) const override {
    calls_->request = request;
    if (request.count != values_.size()) return Outcome{Outcome::Code::kInternal, "another count"};
    std::copy(values_.begin(), values_.end(), static_cast<Acc*>(request.values));
    if (request.counts != nullptr) std::copy(counts_.begin(), counts_.end(), request.counts);
    return Outcome{};
  }
  Outcome Load(const HostState<Acc>&) override { return Outcome{}; }
  uint64_t HostBytes() const override { return 0; }

 private:
  std::vector<Acc> values_;
  std::vector<int64_t> counts_;
  Calls* const calls_;
};

// The CPU backend, counting the accumulators it makes.
class CountingHost final : public AccumulatorFactory {
 public:
  absl::string_view name() const override { return "cpu"; }
  std::unique_ptr<FieldAccumulator> Make(const FieldSpec& field) const override {
    ++made;
    return CpuAccumulatorFactory::Default().Make(field);
  }
  mutable int made = 0;
};

ReducerMakers FixedStateMakers(Calls* calls) {
  ReducerMakers makers;
  makers.f32 = [calls](const ReducerSpec& r) { return std::make_unique<FixedStateReducer<float>>(r, calls); };
  makers.i64 = [calls](const ReducerSpec& r) { return std::make_unique<FixedStateReducer<int64_t>>(r, calls); };
  return makers;
}

class PortableAccumulatorTest : public ::testing::Test {
 protected:
  absl::StatusOr<ReportedField> Report(const ReductionSpec& spec, int64_t contributions, double weight_sum) {
    PortableAccumulatorFactory factory("fake", CpuAccumulatorFactory::Default(), FixedStateMakers(&calls_), {}, nullptr);
    const std::unique_ptr<FieldAccumulator> accumulator = factory.Make(spec.fields()[0]);
    return accumulator->Report(contributions, weight_sum);
  }

  Calls calls_;
};

TEST_F(PortableAccumulatorTest, ASumIsWrittenStraightIntoItsResult) {
  for (Intrinsic intrinsic : {Intrinsic::kFederatedSum, Intrinsic::kSparseSum, Intrinsic::kFederatedMax}) {
    calls_ = Calls{};
    const auto spec = OneFieldSpec(DType::kFloat32, {4}, intrinsic);
    absl::StatusOr<ReportedField> reported = Report(*spec, 2, 0);
    ASSERT_TRUE(reported.ok()) << reported.status();
    const absl::Span<float> values = reported->value.mutable_values<float>();
    EXPECT_EQ(std::vector<float>(values.begin(), values.end()), (std::vector<float>{1, 2, 3, 4}));
    ASSERT_TRUE(calls_.request.has_value()) << IntrinsicName(intrinsic);
    EXPECT_EQ(calls_.request->divide, Divide::kNone) << IntrinsicName(intrinsic);
    EXPECT_EQ(calls_.request->type, portable::ResultRequest::Type::kState);
    EXPECT_EQ(calls_.request->counts, nullptr);
    EXPECT_EQ(calls_.saves, 0) << IntrinsicName(intrinsic) << ": a host copy of the state was made";
  }
}

TEST_F(PortableAccumulatorTest, EachMeanAsksForItsDivision) {
  struct Case {
    Intrinsic intrinsic;
    std::vector<int64_t> shape;
    Divide divide;
    double scalar;
  };
  for (const Case& c : {Case{Intrinsic::kFederatedMean, {4}, Divide::kByScalar, 3},
                        Case{Intrinsic::kFederatedWeightedMean, {4}, Divide::kByScalar, 2.5},
                        Case{Intrinsic::kSparseMean, {4}, Divide::kByRowCount, 0},
                        Case{Intrinsic::kRowSparseMean, {2, 2}, Divide::kByRowCount, 0},
                        Case{Intrinsic::kSparseWeightedMean, {4}, Divide::kByRowWeightSum, 0}}) {
    calls_ = Calls{};
    const auto spec = OneFieldSpec(DType::kFloat32, c.shape, c.intrinsic);
    ASSERT_TRUE(Report(*spec, /*contributions=*/3, /*weight_sum=*/2.5).ok()) << IntrinsicName(c.intrinsic);
    ASSERT_TRUE(calls_.request.has_value());
    EXPECT_EQ(calls_.request->divide, c.divide) << IntrinsicName(c.intrinsic);
    EXPECT_EQ(calls_.request->scalar, c.scalar) << IntrinsicName(c.intrinsic);
    EXPECT_EQ(calls_.request->count, 4u);
    EXPECT_EQ(calls_.saves, 0) << IntrinsicName(c.intrinsic);
  }
}

// No contributions, or no weight: nothing to divide by, the sums are written as they are
// (as the CPU backend's report does).
TEST_F(PortableAccumulatorTest, ADenseMeanOfNothingDividesNothing) {
  ASSERT_TRUE(Report(*OneFieldSpec(DType::kFloat32, {4}, Intrinsic::kFederatedMean), 0, 0).ok());
  EXPECT_EQ(calls_.request->divide, Divide::kNone);
  ASSERT_TRUE(Report(*OneFieldSpec(DType::kFloat32, {4}, Intrinsic::kFederatedWeightedMean), 3, 0).ok());
  EXPECT_EQ(calls_.request->divide, Divide::kNone);
}

TEST_F(PortableAccumulatorTest, AnIntegerMeanIsAFloat64Result) {
  const auto spec = OneFieldSpec(DType::kInt32, {4}, Intrinsic::kFederatedMean);
  absl::StatusOr<ReportedField> reported = Report(*spec, 2, 0);
  ASSERT_TRUE(reported.ok()) << reported.status();
  EXPECT_EQ(calls_.request->type, portable::ResultRequest::Type::kFloat64);
  EXPECT_EQ(reported->value.dtype, DType::kFloat64);
  EXPECT_EQ(reported->value.bytes.size(), 4 * sizeof(double));
  calls_ = Calls{};
  ASSERT_TRUE(Report(*OneFieldSpec(DType::kInt32, {4}, Intrinsic::kFederatedSum), 2, 0).ok());
  EXPECT_EQ(calls_.request->type, portable::ResultRequest::Type::kState) << "an integer sum stays int64";
}

TEST_F(PortableAccumulatorTest, CountsToReportAreWrittenBesideTheValues) {
  const auto spec = OneFieldSpec(DType::kFloat32, {3}, Intrinsic::kSparseSum, /*report_counts=*/true);
  absl::StatusOr<ReportedField> reported = Report(*spec, 1, 0);
  ASSERT_TRUE(reported.ok()) << reported.status();
  EXPECT_NE(calls_.request->counts, nullptr);
  EXPECT_EQ(reported->counts, (std::vector<int64_t>{10, 20, 30}));
  EXPECT_EQ(calls_.saves, 0);
}

// sparse_sum_sparse's result is as large as the state says: made from a copy of it.
TEST_F(PortableAccumulatorTest, ACoalescedSparseSumIsMadeFromACopyOfTheState) {
  const auto spec = OneFieldSpec(DType::kFloat32, {4}, Intrinsic::kSparseSumSparse);
  absl::StatusOr<ReportedField> reported = Report(*spec, 1, 0);
  ASSERT_TRUE(reported.ok()) << reported.status();
  EXPECT_EQ(calls_.saves, 1);
  EXPECT_FALSE(calls_.request.has_value());
  EXPECT_EQ(reported->indices, (std::vector<int64_t>{0, 1, 2, 3}));
}

// A deterministic aggregation's exact sums are the host backend's accumulator, and a
// serialized partial is checked by the host backend's accumulator of the field before the
// reducer loads it: in a plugin, the server's, with its threads and memory.
TEST_F(PortableAccumulatorTest, TheHostBackendMakesTheExactSumsAndChecksPartials) {
  CountingHost host;
  PortableAccumulatorFactory factory("fake", host, FixedStateMakers(&calls_), {}, nullptr);
  const auto exact = OneFieldSpec(DType::kFloat32, {4}, Intrinsic::kFederatedSum, false, {.deterministic = true});
  ASSERT_TRUE(exact->fields()[0].exact_sum);
  const std::unique_ptr<FieldAccumulator> exact_sums = factory.Make(exact->fields()[0]);
  EXPECT_EQ(host.made, 1);

  const auto plain = OneFieldSpec(DType::kFloat32, {4}, Intrinsic::kFederatedSum);
  const std::unique_ptr<FieldAccumulator> on_device = factory.Make(plain->fields()[0]);
  EXPECT_EQ(host.made, 1) << "a float sum is the reducer's";
  ByteWriter out;
  ASSERT_TRUE(CpuAccumulatorFactory::Default().Make(plain->fields()[0])->SerializeTo(out).ok());
  const std::string bytes = out.Take();
  ByteReader in(bytes);
  ASSERT_TRUE(on_device->DeserializeFrom(in, 1).ok());
  EXPECT_EQ(host.made, 2);
}

}  // namespace
}  // namespace fedagg
