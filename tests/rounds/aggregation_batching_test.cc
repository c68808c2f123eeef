// When an aggregation reduces its pending batch: at --batch_size updates, or earlier once the
// batch holds batch_max_bytes of payload.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "service/rounds/aggregation.h"
#include "tests/rounds/rounds_test_util.h"

namespace fedagg {
namespace {

using testing::Contribute;
using testing::NewCountingAggregation;

// Each CountingUpdate holds two int64 values: 16 payload bytes.
constexpr uint64_t kUpdateBytes = 16;

struct Batches {
  std::vector<size_t> sizes;  // updates per reduced batch, in order
};

AggregationOptions Observed(Batches* batches, int batch_size, uint64_t batch_max_bytes) {
  AggregationOptions options;
  options.batch_size = batch_size;
  options.batch_max_bytes = batch_max_bytes;
  options.flush_interval = absl::Hours(1);  // only the limits under test close a batch
  options.on_batch_reduced = [batches](absl::Duration, size_t size) { batches->sizes.push_back(size); };
  return options;
}

TEST(AggregationBatchingTest, BatchIsReducedAtBatchSizeUpdates) {
  Batches batches;
  auto aggregation = NewCountingAggregation("r", Observed(&batches, 3, uint64_t{1} << 30));
  for (int c = 0; c < 7; ++c) Contribute(*aggregation, "client-" + std::to_string(c), c);
  EXPECT_EQ(batches.sizes, (std::vector<size_t>{3, 3}));  // the 7th waits in the pending batch
}

TEST(AggregationBatchingTest, BatchIsReducedOnceItHoldsBatchMaxBytes) {
  Batches batches;
  auto aggregation = NewCountingAggregation("r", Observed(&batches, 16, 2 * kUpdateBytes));
  for (int c = 0; c < 5; ++c) Contribute(*aggregation, "client-" + std::to_string(c), c);
  EXPECT_EQ(batches.sizes, (std::vector<size_t>{2, 2}));
}

TEST(AggregationBatchingTest, EveryUpdateCountsOnceWhateverTheBatchBoundaries) {
  Batches batches;
  auto aggregation = NewCountingAggregation("r", Observed(&batches, 16, kUpdateBytes));
  int64_t expected = 0;
  for (int c = 0; c < 5; ++c) {
    Contribute(*aggregation, "client-" + std::to_string(c), 10 + c);
    expected += 10 + c;
  }
  EXPECT_EQ(batches.sizes, (std::vector<size_t>(5, 1)));  // one update already fills a batch
  ASSERT_TRUE(aggregation->Seal().ok());
  ASSERT_EQ(aggregation->state(), v1::FINALIZED) << aggregation->Status().detail();
  absl::StatusOr<std::shared_ptr<const AggregateResult>> result = aggregation->Result();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ((*result)->contributions, 5);
  EXPECT_EQ((*result)->fields[0].value.values<int64_t>()[0], 5);
  EXPECT_EQ((*result)->fields[0].value.values<int64_t>()[1], expected);
}

}  // namespace
}  // namespace fedagg
