// MemoryBudget and MemoryReservation: claims within the budget, refusals that hold
// nothing, release on destruction and move, unchecked claims for committed memory; and
// the two holders in the core — UpdateBuffer and the accumulators' MemoryBytes.
#include "service/core/memory_budget.h"

#include "service/core/update_buffer.h"
#include "tests/core/core_test_util.h"

namespace fedagg::testing {
namespace {

TEST(MemoryBudgetTest, ClaimsUpToTheLimitAndReleasesOnDestruction) {
  MemoryBudget budget(100);
  {
    absl::StatusOr<MemoryReservation> a = budget.Reserve(60, "a");
    ASSERT_TRUE(IsOk(a.status()));
    EXPECT_EQ(budget.used(), 60u);
    absl::StatusOr<MemoryReservation> b = budget.Reserve(41, "an update of 41 bytes");
    EXPECT_TRUE(StatusIs(b.status(), absl::StatusCode::kResourceExhausted,
                         "memory budget reached: an update of 41 bytes needs 41 bytes, 60 of the 100-byte budget"));
    EXPECT_EQ(budget.used(), 60u);  // the refused claim holds nothing
    absl::StatusOr<MemoryReservation> c = budget.Reserve(40, "c");
    ASSERT_TRUE(IsOk(c.status()));
    EXPECT_EQ(budget.used(), 100u);
    MemoryReservation moved = *std::move(c);
    EXPECT_EQ(budget.used(), 100u);
    moved = MemoryReservation();  // releases c's 40 bytes
    EXPECT_EQ(budget.used(), 60u);
  }
  EXPECT_EQ(budget.used(), 0u);
}

TEST(MemoryBudgetTest, AClaimLargerThanTheWholeBudgetIsRefused) {
  MemoryBudget budget(10);
  EXPECT_TRUE(StatusIs(budget.Reserve(uint64_t{1} << 63, "x").status(), absl::StatusCode::kResourceExhausted,
                       "--memory_budget_bytes"));
  EXPECT_EQ(budget.used(), 0u);
}

TEST(MemoryBudgetTest, UncheckedClaimsMayExceedTheBudgetAndBlockNewClaims) {
  MemoryBudget budget(100);
  MemoryReservation accumulator = budget.ReserveUnchecked(10);
  accumulator.ResizeUnchecked(150);
  EXPECT_EQ(budget.used(), 150u);
  EXPECT_EQ(budget.Reserve(1, "x").status().code(), absl::StatusCode::kResourceExhausted);
  accumulator.ResizeUnchecked(20);
  EXPECT_EQ(budget.used(), 20u);
  EXPECT_TRUE(IsOk(budget.Reserve(80, "x").status()));
  EXPECT_EQ(budget.used(), 20u);  // the temporary reservation was released
}

TEST(MemoryBudgetTest, ZeroMeansAccountingWithoutALimit) {
  MemoryBudget budget(0);
  absl::StatusOr<MemoryReservation> big = budget.Reserve(uint64_t{1} << 40, "x");
  ASSERT_TRUE(IsOk(big.status()));
  EXPECT_EQ(budget.used(), uint64_t{1} << 40);
}

TEST(MemoryBudgetTest, AnUpdateBufferHoldsItsBytesUntilDestroyed) {
  auto spec = OneFieldSpec(DType::kFloat32, {8}, Intrinsic::kFederatedSum);
  MemoryBudget budget(40);
  {
    absl::StatusOr<UpdateBuffer> buffer = UpdateBuffer::Create(*spec, {0}, std::nullopt, 1 << 20, &budget);
    ASSERT_TRUE(IsOk(buffer.status()));
    EXPECT_EQ(budget.used(), 32u);
    absl::StatusOr<UpdateBuffer> second = UpdateBuffer::Create(*spec, {0}, std::nullopt, 1 << 20, &budget);
    EXPECT_TRUE(StatusIs(second.status(), absl::StatusCode::kResourceExhausted, "an update of 32 bytes"));
    UpdateBuffer moved = *std::move(buffer);
    EXPECT_EQ(budget.used(), 32u);
  }
  EXPECT_EQ(budget.used(), 0u);
}

TEST(MemoryBudgetTest, AccumulatorsReportTheirMemory) {
  PartialAggregate dense(OneFieldSpec(DType::kFloat64, {100}, Intrinsic::kFederatedSum));
  EXPECT_GE(dense.MemoryBytes(), 800u);
  PartialAggregate sparse(OneFieldSpec(DType::kFloat32, {1000}, Intrinsic::kSparseSumSparse));
  const uint64_t empty = sparse.MemoryBytes();
  std::vector<int64_t> indices = {1, 5, 999};
  std::vector<float> values = {1, 2, 3};
  UpdateView update{{FieldValue::Sparse<float>(indices, values)}, std::nullopt};
  ASSERT_TRUE(IsOk(sparse.Accumulate(update)));
  EXPECT_GT(sparse.MemoryBytes(), empty);  // the sparse union grows with its coordinates
}

}  // namespace
}  // namespace fedagg::testing
