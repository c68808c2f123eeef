// Tests of the CPU backend's sparse_sum_sparse accumulator at sizes where it shards its
// state, partitions batches across threads, and coalesces a shard's part of a batch both
// ways (slot table and sort): against a serial model (an ordered map per batch: a
// coordinate's values summed in batch order, each update counted once, then added to the
// running state, state first), which it must match bit for bit, over several batches, for
// merges of two accumulators and through a serialization round trip.
#include "service/core/cpu_sparse_union_accumulator.h"

#include <cstdint>
#include <map>
#include <vector>

#include "gtest/gtest.h"
#include "service/core/cpu_kernels.h"
#include "service/core/thread_pool.h"
#include "tests/core/core_test_util.h"
#include "tests/core/random_sparse_batch.h"

namespace fedagg {
namespace {

using ::fedagg::testing::BitIdentical;
using ::fedagg::testing::IsOk;
using ::fedagg::testing::OneFieldSpec;
using ::fedagg::testing::RandomBatch;
using ::fedagg::testing::SparseBatch;
using ::fedagg::testing::ValueOrDie;

// The serial model of sparse_sum_sparse.
template <typename Acc>
struct UnionModel {
  struct Coordinate {
    Acc value;
    int64_t count;
  };
  std::map<int64_t, Coordinate> state;

  void Merge(const std::map<int64_t, Coordinate>& other) {
    for (const auto& [index, c] : other) {
      auto [it, fresh] = state.try_emplace(index, c);
      if (fresh) continue;
      it->second.value = cpu::Add(it->second.value, c.value);
      it->second.count += c.count;
    }
  }
  template <typename In>
  void Add(const SparseBatch<In>& batch) {
    std::map<int64_t, Coordinate> sums;
    std::map<int64_t, size_t> last_update;
    for (size_t u = 0; u < batch.ids.size(); ++u) {
      for (size_t k = 0; k < batch.ids[u].size(); ++k) {
        const int64_t index = batch.ids[u][k];
        auto [it, fresh] = sums.try_emplace(index, Coordinate{Acc{0}, 0});
        it->second.value = cpu::Add(it->second.value, cpu::Widen<Acc>(batch.values[u][k]));
        auto [last, first_touch] = last_update.try_emplace(index, u);
        if (first_touch || last->second != u) ++it->second.count;
        last->second = u;
      }
    }
    Merge(sums);
  }
};

template <typename Acc>
void ExpectEqualsModel(const CpuSparseUnionAccumulator<Acc>& accumulator, const UnionModel<Acc>& model) {
  const ReportedField got = ValueOrDie(accumulator.Report(1, 1));
  std::vector<int64_t> indices;
  std::vector<Acc> values;
  std::vector<int64_t> counts;
  for (const auto& [index, c] : model.state) {
    indices.push_back(index);
    values.push_back(c.value);
    counts.push_back(c.count);
  }
  EXPECT_EQ(got.indices, indices);
  const absl::Span<const Acc> got_values = got.value.values<Acc>();
  EXPECT_TRUE(BitIdentical(std::vector<Acc>(got_values.begin(), got_values.end()), values));
  EXPECT_EQ(got.counts, counts);
}

// Random batches into one accumulator on a pool of `threads`, against the model: one
// batch of updates of up to max_entries[b] entries for each b.
template <typename Acc, typename In>
void ExpectSameAsModel(int64_t rows, std::vector<int64_t> max_entries, int threads) {
  SCOPED_TRACE(::testing::Message() << "rows " << rows << ", max entries " << ::testing::PrintToString(max_entries)
                                    << ", threads " << threads);
  const auto spec = OneFieldSpec(DTypeOf<In>::value, {rows}, Intrinsic::kSparseSumSparse, true);
  ThreadPool pool(threads);
  CpuSparseUnionAccumulator<Acc> accumulator(spec->fields()[0], pool);
  UnionModel<Acc> model;
  for (size_t b = 0; b < max_entries.size(); ++b) {
    const SparseBatch<In> batch =
        RandomBatch<In>(static_cast<uint64_t>(rows * 7) + b, rows, 1, 6, max_entries[b]);
    ASSERT_TRUE(IsOk(accumulator.AccumulateBatch(batch.views, batch.weights)));
    model.Add(batch);
  }
  ExpectEqualsModel(accumulator, model);
}

// Three batches of updates of up to `max_entries` entries.
template <typename Acc, typename In>
void ExpectSameAsModel(int64_t rows, int64_t max_entries, int threads) {
  ExpectSameAsModel<Acc, In>(rows, {max_entries, max_entries, max_entries}, threads);
}

// One shard (7 coordinates), shards coalesced in slot tables (2^20 + 3: 257 shards of
// 4,096 with ~350 entries each), shards sorted (2^24: ~170 entries in 16,384; 2^40:
// shards of 2^30, four radix passes), one thread and several.
TEST(SparseUnionTest, SameAsSerialModel) {
  for (const int64_t rows : {int64_t{7}, (int64_t{1} << 20) + 3, int64_t{1} << 24, int64_t{1} << 40}) {
    for (const int threads : {1, 2, 3}) ExpectSameAsModel<float, float>(rows, 30000, threads);
  }
  const int64_t rows = (int64_t{1} << 18) + 5;
  ExpectSameAsModel<float, Float16>(rows, 30000, 2);
  ExpectSameAsModel<double, double>(rows, 30000, 2);
  ExpectSameAsModel<int64_t, int32_t>(rows, 30000, 2);
  ExpectSameAsModel<int64_t, int64_t>(int64_t{1} << 40, 30000, 2);
  // Small batches: one thread partitions and merges them.
  ExpectSameAsModel<float, float>(rows, 40, 2);
  // Small batches into a large state: each shard's few entries are found by binary
  // search, some new coordinates merged in from the back.
  ExpectSameAsModel<float, float>(rows, {30000, 40, 40}, 2);
}

// Two accumulators' states merged (state first), and the merge serialized and read back.
TEST(SparseUnionTest, MergeAndRoundTrip) {
  for (const int64_t rows : {int64_t{100}, (int64_t{1} << 20) + 3, int64_t{1} << 40}) {
    SCOPED_TRACE(::testing::Message() << "rows " << rows);
    const auto spec = OneFieldSpec(DType::kFloat32, {rows}, Intrinsic::kSparseSumSparse, true);
    const FieldSpec& field = spec->fields()[0];
    ThreadPool pool(2);
    CpuSparseUnionAccumulator<float> a(field, pool), b(field, pool);
    const SparseBatch<float> first = RandomBatch<float>(21, rows, 1, 5, 30000);
    const SparseBatch<float> second = RandomBatch<float>(22, rows, 1, 4, 30000);
    ASSERT_TRUE(IsOk(a.AccumulateBatch(first.views, first.weights)));
    ASSERT_TRUE(IsOk(b.AccumulateBatch(second.views, second.weights)));
    UnionModel<float> model, other;
    model.Add(first);
    other.Add(second);
    model.Merge(other.state);
    ASSERT_TRUE(IsOk(a.MergeWith(b)));
    ExpectEqualsModel(a, model);

    ByteWriter out;
    ASSERT_TRUE(IsOk(a.SerializeTo(out)));
    const std::string bytes = out.Take();
    ByteReader in(bytes);
    CpuSparseUnionAccumulator<float> read(field, pool);
    ASSERT_TRUE(IsOk(read.DeserializeFrom(in, 9)));
    EXPECT_TRUE(in.AtEnd());
    ExpectEqualsModel(read, model);
  }
}

}  // namespace
}  // namespace fedagg
