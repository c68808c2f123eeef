// PortableAccumulatorFactory's adapter, over a fake reducer: a result that is the state as
// kept (a sum) is copied straight out of the reducer into the result (SaveValues), with no
// host copy of the whole state; any other (a mean) is made from one (Save), divided as the
// CPU backend divides.
#include <algorithm>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "portable/portable_accumulator_factory.h"
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

struct Copies {
  int saves = 0;        // whole states copied out
  int value_saves = 0;  // values copied into a caller's buffer
};

// A reducer whose state is fixed: 1, 2, 3, ... (as if updates had summed to it).
class FixedStateReducer final : public FieldReducer<float> {
 public:
  FixedStateReducer(const ReducerSpec& spec, Copies* copies)
      : values_(static_cast<size_t>(spec.rows * spec.row_width)), copies_(copies) {
    for (size_t i = 0; i < values_.size(); ++i) values_[i] = static_cast<float>(i + 1);
  }

  Outcome Accumulate(const HostBatch&) override { return Outcome{}; }
  Outcome Merge(const FieldReducer<float>&) override { return Outcome{}; }
  Outcome Save(HostState<float>* out) const override {
    ++copies_->saves;
    out->values = values_;
    return Outcome{};
  }
  Outcome SaveValues(float* out, size_t count) const override {
    ++copies_->value_saves;
    if (count != values_.size()) return Outcome{Outcome::Code::kInternal, "another count"};
    std::copy(values_.begin(), values_.end(), out);
    return Outcome{};
  }
  Outcome Load(const HostState<float>&) override { return Outcome{}; }
  uint64_t HostBytes() const override { return 0; }

 private:
  std::vector<float> values_;
  Copies* const copies_;
};

class PortableAccumulatorTest : public ::testing::Test {
 protected:
  PortableAccumulatorFactory Factory() {
    ReducerMakers makers;
    makers.f32 = [this](const ReducerSpec& spec) { return std::make_unique<FixedStateReducer>(spec, &copies_); };
    return PortableAccumulatorFactory("fake", std::move(makers), {});
  }

  std::vector<float> ReportedValues(const ReductionSpec& spec, int64_t contributions) {
    PortableAccumulatorFactory factory = Factory();
    const std::unique_ptr<FieldAccumulator> accumulator = factory.Make(spec.fields()[0]);
    absl::StatusOr<ReportedField> reported = accumulator->Report(contributions, /*weight_sum=*/0);
    EXPECT_TRUE(reported.ok()) << reported.status();
    if (!reported.ok()) return {};
    const absl::Span<float> values = reported->value.mutable_values<float>();
    return std::vector<float>(values.begin(), values.end());
  }

  Copies copies_;
};

TEST_F(PortableAccumulatorTest, ASumIsCopiedStraightIntoItsResult) {
  for (Intrinsic intrinsic : {Intrinsic::kFederatedSum, Intrinsic::kSparseSum, Intrinsic::kFederatedMax}) {
    copies_ = Copies{};
    const auto spec = OneFieldSpec(DType::kFloat32, {4}, intrinsic);
    EXPECT_EQ(ReportedValues(*spec, 2), (std::vector<float>{1, 2, 3, 4})) << IntrinsicName(intrinsic);
    EXPECT_EQ(copies_.value_saves, 1) << IntrinsicName(intrinsic);
    EXPECT_EQ(copies_.saves, 0) << IntrinsicName(intrinsic) << ": a host copy of the state was made";
  }
}

TEST_F(PortableAccumulatorTest, AMeanIsDividedFromACopyOfTheState) {
  const auto spec = OneFieldSpec(DType::kFloat32, {4}, Intrinsic::kFederatedMean);
  EXPECT_EQ(ReportedValues(*spec, 2), (std::vector<float>{0.5, 1, 1.5, 2}));
  EXPECT_EQ(copies_.saves, 1);
  EXPECT_EQ(copies_.value_saves, 0);
}

// Counts to report come with the state, so such a sum is made from a copy of it.
TEST_F(PortableAccumulatorTest, ASumWithCountsIsMadeFromACopyOfTheState) {
  const auto spec = OneFieldSpec(DType::kFloat32, {4}, Intrinsic::kSparseSum, /*report_counts=*/true);
  EXPECT_FALSE(spec->fields()[0].result_is_state);
  PortableAccumulatorFactory factory = Factory();
  const std::unique_ptr<FieldAccumulator> accumulator = factory.Make(spec->fields()[0]);
  static_cast<void>(accumulator->Report(1, 0));
  EXPECT_EQ(copies_.saves, 1);
  EXPECT_EQ(copies_.value_saves, 0);
}

}  // namespace
}  // namespace fedagg
