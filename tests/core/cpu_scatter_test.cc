// Tests of the CPU backend's scatters at sizes where they partition, split work across
// threads and cut a batch into runs: the partitioned COO scatter (sparse_sum, sparse_mean,
// sparse_weighted_mean) and the row-sparse accumulator's row adds, each against a serial
// scatter of the same batch in batch order, which they must match bit for bit (values,
// counts, weight sums), with the edge cases: an index repeated in one update, indices 0
// and rows - 1, empty updates, a table of one bucket, weights, integer and half-float
// inputs; updates whose indices ascend (scattered with no partition buffer), unsorted ones,
// and batches that mix both.
#include "service/core/cpu_partitioned_scatter.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "service/core/cpu_kernels.h"
#include "service/core/cpu_scatter_accumulator.h"
#include "service/core/thread_pool.h"
#include "tests/core/core_test_util.h"
#include "tests/core/random_sparse_batch.h"

namespace fedagg {
namespace {

using ::fedagg::testing::BitIdentical;
using ::fedagg::testing::IsOk;
using ::fedagg::testing::OneFieldSpec;
using ::fedagg::testing::RandomBatch;
using ::fedagg::testing::RandomValue;
using ::fedagg::testing::SparseBatch;
using ::fedagg::testing::ValueOrDie;

// The serial scatter the partitioned one must equal.
template <typename Acc>
struct SerialResult {
  std::vector<Acc> acc;
  std::vector<int64_t> counts;
  std::vector<double> weight_sums;
};

// The batch is scattered `repeats` times over.
template <typename Acc, typename In>
SerialResult<Acc> SerialScatter(const SparseBatch<In>& batch, int64_t rows, int64_t width, bool counts, bool weighted,
                                int repeats = 1) {
  SerialResult<Acc> out{std::vector<Acc>(static_cast<size_t>(rows * width)),
                        std::vector<int64_t>(counts ? static_cast<size_t>(rows) : 0),
                        std::vector<double>(weighted ? static_cast<size_t>(rows) : 0)};
  std::vector<size_t> last(static_cast<size_t>(rows), 0);
  size_t serial = 0;
  for (int r = 0; r < repeats; ++r) {
    for (size_t u = 0; u < batch.ids.size(); ++u) {
      ++serial;
      const Acc weight = static_cast<Acc>(batch.weights[u]);
      for (size_t k = 0; k < batch.ids[u].size(); ++k) {
        const size_t row = static_cast<size_t>(batch.ids[u][k]);
        for (int64_t e = 0; e < width; ++e) {
          const Acc v = cpu::Widen<Acc>(batch.values[u][k * static_cast<size_t>(width) + static_cast<size_t>(e)]);
          Acc& target = out.acc[row * static_cast<size_t>(width) + static_cast<size_t>(e)];
          target = cpu::Add(target, weighted ? weight * v : v);
        }
        if (!counts || last[row] == serial) continue;
        last[row] = serial;
        ++out.counts[row];
        if (weighted) out.weight_sums[row] += batch.weights[u];
      }
    }
  }
  return out;
}

// Runs the partitioned scatter of a sealed batch on a pool of `threads` twice (so the
// second adds to the first's state) and compares with the serial scatter of it twice.
template <typename Acc, typename In>
void ExpectSameAsSerial(const SparseBatch<In>& batch, int64_t rows, bool counts, bool weighted, int threads) {
  SCOPED_TRACE(::testing::Message() << "rows " << rows << ", counts " << counts << ", weighted " << weighted
                                    << ", threads " << threads);
  const SerialResult<Acc> want = SerialScatter<Acc>(batch, rows, 1, counts, weighted, 2);

  ThreadPool pool(threads);
  SerialResult<Acc> got{std::vector<Acc>(static_cast<size_t>(rows)),
                        std::vector<int64_t>(counts ? static_cast<size_t>(rows) : 0),
                        std::vector<double>(weighted ? static_cast<size_t>(rows) : 0)};
  const cpu::ScatterTarget<Acc> target{absl::MakeSpan(got.acc), absl::MakeSpan(got.counts),
                                       absl::MakeSpan(got.weight_sums)};
  for (int repeat = 0; repeat < 2; ++repeat) {
    cpu::PartitionedScatterAdd<Acc>(batch.views, batch.weights, weighted, target, pool);
  }
  EXPECT_TRUE(BitIdentical(got.acc, want.acc));
  EXPECT_EQ(got.counts, want.counts);
  EXPECT_TRUE(BitIdentical(got.weight_sums, want.weight_sums));
}

// The weighted scatter of `batch` into an empty table of `rows`, once, on two threads.
SerialResult<float> ScatterWeightedOnce(const SparseBatch<float>& batch, int64_t rows) {
  ThreadPool pool(2);
  SerialResult<float> got{std::vector<float>(static_cast<size_t>(rows)), std::vector<int64_t>(static_cast<size_t>(rows)),
                          std::vector<double>(static_cast<size_t>(rows))};
  cpu::PartitionedScatterAdd<float>(
      batch.views, batch.weights, true,
      {absl::MakeSpan(got.acc), absl::MakeSpan(got.counts), absl::MakeSpan(got.weight_sums)}, pool);
  return got;
}

// The batch with the entries of every `stride`-th update (from the first) sorted by index,
// stably: an index repeated in one update keeps its values in their order. With `marked`,
// the sorted updates carry validation's mark (FieldValue::ascending), as the service's do.
template <typename In>
SparseBatch<In> WithAscendingUpdates(const SparseBatch<In>& batch, size_t stride = 1, bool marked = false) {
  SparseBatch<In> out;
  for (size_t u = 0; u < batch.ids.size(); ++u) {
    std::vector<size_t> order(batch.ids[u].size());
    std::iota(order.begin(), order.end(), size_t{0});
    if (u % stride == 0) {
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return batch.ids[u][a] < batch.ids[u][b]; });
    }
    std::vector<int64_t> ids;
    std::vector<In> values;
    for (const size_t k : order) {
      ids.push_back(batch.ids[u][k]);
      values.push_back(batch.values[u][k]);
    }
    out.Add(std::move(ids), std::move(values), batch.weights[u]);
  }
  out.Seal(Encoding::kSparse);
  for (size_t u = 0; marked && u < out.fields.size(); u += stride) out.fields[u].ascending = true;
  return out;
}

TEST(PartitionedScatterTest, HandWrittenEdgeCases) {
  // Rows 0 and 4 (the last), an index repeated in one update, an empty update.
  SparseBatch<float> batch;
  batch.Add({4, 0, 4, 4}, {1, 2, 3, 4}, 2);
  batch.Add({}, {}, 3);
  batch.Add({0, 2}, {8, 16}, 0.5);
  batch.Seal(Encoding::kSparse);
  const SerialResult<float> got = ScatterWeightedOnce(batch, 5);
  EXPECT_EQ(got.acc, (std::vector<float>{2 * 2 + 0.5f * 8, 0, 0.5f * 16, 0, 2 * (1 + 3 + 4)}));
  EXPECT_EQ(got.counts, (std::vector<int64_t>{2, 0, 1, 0, 1}));
  EXPECT_EQ(got.weight_sums, (std::vector<double>{2.5, 0, 0.5, 0, 2}));
}

TEST(PartitionedScatterTest, NothingToAdd) {
  SparseBatch<float> batch;
  batch.Add({}, {}, 1);
  batch.Seal(Encoding::kSparse);
  ThreadPool pool(2);
  std::vector<float> acc(3, 1.0f);
  std::vector<int64_t> counts(3);
  cpu::PartitionedScatterAdd<float>(batch.views, batch.weights, false,
                                    {absl::MakeSpan(acc), absl::MakeSpan(counts), {}}, pool);
  cpu::PartitionedScatterAdd<float>({}, {}, false, {absl::MakeSpan(acc), absl::MakeSpan(counts), {}}, pool);
  EXPECT_EQ(acc, (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(counts, (std::vector<int64_t>{0, 0, 0}));
}

// One coordinate, many entries: one bucket of one row, split across threads.
TEST(PartitionedScatterTest, OneRow) {
  const SparseBatch<float> batch = RandomBatch<float>(1, 1, 1, 5, 40000);
  ExpectSameAsSerial<float>(batch, 1, true, true, 2);
}

// The largest table, 2^22 rows, partitions into twice the buckets of 2^20 + 3 and takes no
// other path. Under ThreadSanitizer, whose build is there to check the threads'
// interleavings, it costs two minutes and adds no interleaving the smaller tables lack, so
// only the other builds run it.
constexpr int64_t kLargestTableRows = int64_t{1} << 22;
#if defined(__SANITIZE_THREAD__)
constexpr bool kUnderThreadSanitizer = true;
#else
constexpr bool kUnderThreadSanitizer = false;
#endif

// Tables of one bucket and of many, with batches large enough to split across threads,
// for every accumulator and some inputs.
TEST(PartitionedScatterTest, SameAsSerialScatter) {
  for (const int64_t rows : {int64_t{7}, int64_t{1} << 12, (int64_t{1} << 20) + 3, kLargestTableRows}) {
    if (kUnderThreadSanitizer && rows == kLargestTableRows) continue;
    for (const int threads : {1, 2, 3}) {
      const SparseBatch<float> floats = RandomBatch<float>(static_cast<uint64_t>(rows + threads), rows, 1, 6, 30000);
      ExpectSameAsSerial<float>(floats, rows, false, false, threads);
      ExpectSameAsSerial<float>(floats, rows, true, false, threads);
      ExpectSameAsSerial<float>(floats, rows, true, true, threads);
      ExpectSameAsSerial<double>(floats, rows, true, true, threads);
    }
  }
  const int64_t rows = (int64_t{1} << 18) + 5;
  ExpectSameAsSerial<float>(RandomBatch<Float16>(7, rows, 1, 5, 30000), rows, true, true, 2);
  ExpectSameAsSerial<double>(RandomBatch<double>(8, rows, 1, 5, 30000), rows, true, true, 2);
  ExpectSameAsSerial<int64_t>(RandomBatch<int32_t>(9, rows, 1, 5, 30000), rows, true, false, 2);
  ExpectSameAsSerial<int64_t>(RandomBatch<int64_t>(10, rows, 1, 5, 30000), rows, false, false, 2);
}

// Ascending updates take no partition buffer; batches of ascending updates only, and
// batches where they alternate with unsorted ones (each change of kind starts a run).
// One test per table size (7, 2^20 + 3 and 2^22 rows), so that ctest can run them side
// by side.
class AscendingUpdatesTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(AscendingUpdatesTest, SameAsSerialScatter) {
  const int64_t rows = GetParam();
  if (kUnderThreadSanitizer && rows == kLargestTableRows) {
    GTEST_SKIP() << "the 2^22-row table runs in the builds without ThreadSanitizer (see kLargestTableRows)";
  }
  for (const int threads : {1, 2, 3}) {
    const SparseBatch<float> unsorted = RandomBatch<float>(static_cast<uint64_t>(rows + 17 * threads), rows, 1, 7, 30000);
    for (const size_t stride : {size_t{1}, size_t{2}, size_t{3}}) {
      for (const bool marked : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "every " << stride << " updates ascending, marked " << marked);
        const SparseBatch<float> batch = WithAscendingUpdates(unsorted, stride, marked);
        ExpectSameAsSerial<float>(batch, rows, false, false, threads);
        ExpectSameAsSerial<float>(batch, rows, true, true, threads);
        ExpectSameAsSerial<double>(batch, rows, true, false, threads);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TableSizes, AscendingUpdatesTest,
                         ::testing::Values(int64_t{7}, (int64_t{1} << 20) + 3, kLargestTableRows));

// Ascending updates of half-float and integer inputs.
TEST(PartitionedScatterTest, AscendingUpdatesOfOtherInputTypesSameAsSerialScatter) {
  const int64_t rows = (int64_t{1} << 18) + 5;
  ExpectSameAsSerial<float>(WithAscendingUpdates(RandomBatch<Float16>(21, rows, 1, 5, 30000)), rows, true, true, 2);
  ExpectSameAsSerial<int64_t>(WithAscendingUpdates(RandomBatch<int32_t>(22, rows, 1, 5, 30000)), rows, true, false, 2);
}

TEST(PartitionedScatterTest, AscendingHandWritten) {
  // Repeats (adjacent once sorted) are counted once per update, 0 and rows - 1 included.
  SparseBatch<float> batch;
  batch.Add({0, 0, 3, 4, 4}, {1, 2, 3, 4, 5}, 2);
  batch.Add({}, {}, 3);
  batch.Add({0, 2}, {8, 16}, 0.5);
  batch.Seal(Encoding::kSparse);
  const SerialResult<float> got = ScatterWeightedOnce(batch, 5);
  EXPECT_EQ(got.acc, (std::vector<float>{2 * 1 + 2 * 2 + 0.5f * 8, 0, 0.5f * 16, 2 * 3, 2 * 4 + 2 * 5}));
  EXPECT_EQ(got.counts, (std::vector<int64_t>{2, 0, 1, 1, 1}));
  EXPECT_EQ(got.weight_sums, (std::vector<double>{2.5, 0, 0.5, 2, 2}));
}

// A batch of more entries than one run partitions: cut into runs of whole updates, with
// counts still once per update and coordinate (each update repeats indices).
TEST(PartitionedScatterTest, BatchOfSeveralRuns) {
  SparseBatch<float> batch;
  std::mt19937_64 rng(11);
  const int64_t rows = 5000;
  for (int u = 0; u < 2; ++u) {
    std::vector<int64_t> ids((size_t{5} << 20) / 2);
    for (int64_t& id : ids) id = std::uniform_int_distribution<int64_t>(0, rows - 1)(rng);
    std::vector<float> values(ids.size());
    for (float& v : values) v = RandomValue<float>(rng);
    batch.Add(std::move(ids), std::move(values), 1 + u);
  }
  batch.Seal(Encoding::kSparse);
  ExpectSameAsSerial<float>(batch, rows, true, true, 2);
}

// Row-sparse through the accumulator: threads own row ranges; sums and counts must equal
// a serial scatter's, repeated row ids included.
TEST(RowScatterTest, SameAsSerialScatter) {
  const int64_t rows = 20000, width = 8;
  const SparseBatch<float> batch = RandomBatch<float>(12, rows, width, 6, 4000, Encoding::kRowSparse);
  const SerialResult<float> want = SerialScatter<float>(batch, rows, width, true, false);
  const std::shared_ptr<const ReductionSpec> spec =
      OneFieldSpec(DType::kFloat32, {rows, width}, Intrinsic::kRowSparseSum, true);
  ThreadPool pool(3);
  CpuScatterAccumulator<float> accumulator(spec->fields()[0], pool);
  ASSERT_TRUE(IsOk(accumulator.AccumulateBatch(batch.views, batch.weights)));
  const ReportedField got = ValueOrDie(accumulator.Report(6, 6));
  const absl::Span<const float> values = got.value.values<float>();
  EXPECT_TRUE(BitIdentical(std::vector<float>(values.begin(), values.end()), want.acc));
  EXPECT_EQ(got.counts, want.counts);
}

}  // namespace
}  // namespace fedagg
