// Tests of ExactSparseUnion, the sharded state of a deterministic sparse_sum_sparse field:
// against a model that keeps every value sent for a coordinate and sums them with the
// independent correctly rounded sum (correctly_rounded_sum.h), for tables of one shard
// and of many, shards coalesced and searched, one thread and several; the same bits for
// any batching and merge order; its serialization read back; and the refusals of input
// that is not a union's.
#include "service/core/exact_sparse_union.h"

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "service/core/cpu_kernels.h"
#include "service/core/thread_pool.h"
#include "tests/core/core_test_util.h"
#include "tests/core/correctly_rounded_sum.h"
#include "tests/core/random_sparse_batch.h"

namespace fedagg {
namespace {

using ::fedagg::testing::RandomBatch;
using ::fedagg::testing::ReferenceSum;
using ::fedagg::testing::SparseBatch;

// Every value sent, with its coordinate and the update that sent it (batch, update).
struct SentValues {
  struct Sent {
    int64_t index;
    int batch;
    size_t update;
    double value;
  };
  std::vector<Sent> sent;

  template <typename In>
  void Add(const SparseBatch<In>& batch, int batch_number) {
    for (size_t u = 0; u < batch.ids.size(); ++u) {
      for (size_t k = 0; k < batch.ids[u].size(); ++k) {
        sent.push_back({batch.ids[u][k], batch_number, u, cpu::Widen<double>(batch.values[u][k])});
      }
    }
  }
};

// The state holds every coordinate sent, no other, each with the correctly rounded sum of
// its values and the number of updates that sent it.
::testing::AssertionResult EqualsModel(const ExactSparseUnion& state, SentValues model) {
  std::sort(model.sent.begin(), model.sent.end(), [](const SentValues::Sent& a, const SentValues::Sent& b) {
    return std::tie(a.index, a.batch, a.update) < std::tie(b.index, b.batch, b.update);
  });
  size_t next = 0;  // the model's first value of the coordinate expected next
  size_t held = 0;
  for (const ExactSparseUnion::Piece& piece : state.Pieces()) {
    for (size_t i = 0; i < piece.indices.size(); ++i, ++held) {
      if (next == model.sent.size()) return ::testing::AssertionFailure() << "extra index " << piece.indices[i];
      const int64_t index = model.sent[next].index;
      if (piece.indices[i] != index) {
        return ::testing::AssertionFailure() << "index " << piece.indices[i] << " where " << index << " was expected";
      }
      std::vector<double> values;
      int64_t senders = 0;
      for (size_t first = next; next < model.sent.size() && model.sent[next].index == index; ++next) {
        values.push_back(model.sent[next].value);
        const bool same_sender = next > first && model.sent[next].batch == model.sent[next - 1].batch &&
                                 model.sent[next].update == model.sent[next - 1].update;
        if (!same_sender) ++senders;
      }
      const double sum = piece.sums->Rounded(static_cast<int64_t>(i));
      const double want = ReferenceSum(values);
      if (std::memcmp(&sum, &want, sizeof(double)) != 0) {
        return ::testing::AssertionFailure() << "index " << index << ": sum " << sum << ", expected " << want;
      }
      if (piece.counts[i] != senders) {
        return ::testing::AssertionFailure() << "index " << index << ": count " << piece.counts[i] << ", expected "
                                             << senders;
      }
    }
  }
  if (next != model.sent.size()) return ::testing::AssertionFailure() << "index " << model.sent[next].index << " missing";
  if (held != state.size()) return ::testing::AssertionFailure() << "size() " << state.size() << ", " << held << " held";
  return ::testing::AssertionSuccess();
}

std::string Serialized(const ExactSparseUnion& state) {
  ByteWriter out;
  state.SerializeTo(out);
  return out.Take();
}

// One shard (7 coordinates), many shards (2^20 + 3: 257 of 4,096), shards sorted with
// several radix passes (2^24; 2^40, shards of 2^30), one thread and several; three
// batches, each large enough to split over the threads, the last of a few entries only
// (found by binary search in the state).
TEST(ExactSparseUnionTest, SameAsTheCorrectlyRoundedSumsOfEveryValueSent) {
  for (const int64_t rows : {int64_t{7}, (int64_t{1} << 20) + 3, int64_t{1} << 24, int64_t{1} << 40}) {
    for (const int threads : {1, 2, 3}) {
      SCOPED_TRACE(::testing::Message() << "rows " << rows << ", threads " << threads);
      ThreadPool pool(threads);
      ExactSparseUnion state(rows, ExactSums::Grid::kFloat32, pool);
      SentValues model;
      const int64_t entries[] = {30000, 30000, 40};
      for (int b = 0; b < 3; ++b) {
        const SparseBatch<float> batch = RandomBatch<float>(static_cast<uint64_t>(rows) + 10 * b + threads, rows, 1, 6,
                                                            entries[b]);
        state.AddBatch(batch.views);
        model.Add(batch, b);
      }
      EXPECT_TRUE(EqualsModel(state, model));
    }
  }
}

// A coordinate whose float sums depend on their order: 2^100 + 1 - 2^100 is 1 exactly,
// and float64 inputs on their own grid.
TEST(ExactSparseUnionTest, SumsAreExactWhateverTheMagnitudes) {
  ThreadPool pool(2);
  for (const bool float64 : {false, true}) {
    ExactSparseUnion state(100, float64 ? ExactSums::Grid::kFloat64 : ExactSums::Grid::kFloat32, pool);
    SparseBatch<double> batch;
    batch.Add({5, 9}, {0x1p100, 0x1p-60}, 1);
    batch.Add({5}, {1.0}, 1);
    batch.Add({5, 9, 9}, {-0x1p100, 0x1p-60, -0x1p-61}, 1);
    batch.Seal(Encoding::kSparse);
    if (!float64) {  // float32 inputs: the same values fit float32
      SparseBatch<float> floats;
      for (size_t u = 0; u < batch.ids.size(); ++u) {
        floats.Add(batch.ids[u], std::vector<float>(batch.values[u].begin(), batch.values[u].end()), 1);
      }
      floats.Seal(Encoding::kSparse);
      state.AddBatch(floats.views);
    } else {
      state.AddBatch(batch.views);
    }
    const std::vector<ExactSparseUnion::Piece> pieces = state.Pieces();
    ASSERT_EQ(pieces.size(), 1u);
    ASSERT_EQ(pieces[0].indices.size(), 2u);
    EXPECT_EQ(pieces[0].sums->Rounded(0), 1.0);
    EXPECT_EQ(pieces[0].counts[0], 3);
    EXPECT_EQ(pieces[0].sums->Rounded(1), 0x1p-59 - 0x1p-61);
    EXPECT_EQ(pieces[0].counts[1], 2);  // the third update sent 9 twice: counted once
  }
}

// The same updates in one batch, one update a batch, or split over two unions merged
// either way round: the same bytes; and those bytes read back give them again.
TEST(ExactSparseUnionTest, AnyBatchingAndMergeOrderGiveTheSameBitsAndTheyReadBack) {
  const int64_t rows = (int64_t{1} << 20) + 3;
  ThreadPool pool(2);
  const SparseBatch<float> all = RandomBatch<float>(77, rows, 1, 8, 30000);
  ExactSparseUnion whole(rows, ExactSums::Grid::kFloat32, pool);
  whole.AddBatch(all.views);
  const std::string expected = Serialized(whole);

  ExactSparseUnion one_by_one(rows, ExactSums::Grid::kFloat32, pool);
  for (size_t u = 0; u < all.views.size(); ++u) one_by_one.AddBatch(absl::MakeConstSpan(&all.views[u], 1));
  EXPECT_EQ(Serialized(one_by_one), expected);

  const auto first = absl::MakeConstSpan(all.views).subspan(0, 3);
  const auto rest = absl::MakeConstSpan(all.views).subspan(3);
  ExactSparseUnion a(rows, ExactSums::Grid::kFloat32, pool), b(rows, ExactSums::Grid::kFloat32, pool);
  a.AddBatch(first);
  b.AddBatch(rest);
  ExactSparseUnion a_then_b(rows, ExactSums::Grid::kFloat32, pool), b_then_a(rows, ExactSums::Grid::kFloat32, pool);
  a_then_b.MergeWith(a);
  a_then_b.MergeWith(b);
  b_then_a.MergeWith(b);
  b_then_a.MergeWith(a);
  EXPECT_EQ(Serialized(a_then_b), expected);
  EXPECT_EQ(Serialized(b_then_a), expected);

  ExactSparseUnion read(rows, ExactSums::Grid::kFloat32, pool);
  ByteReader in(expected);
  ASSERT_TRUE(read.DeserializeFrom(in, 8, "field 'w'").ok());
  EXPECT_TRUE(in.AtEnd());
  EXPECT_EQ(Serialized(read), expected);
  EXPECT_EQ(read.size(), whole.size());
}

// What a union's layout cannot hold is refused, and the state stays as it was.
TEST(ExactSparseUnionTest, RefusesWhatIsNotAUnionAndKeepsItsState) {
  ThreadPool pool(1);
  constexpr int kWords = 6;  // on the float32 grid
  // A union of `indices`, each with sum 0 and count `count`.
  auto layout = [](const std::vector<int64_t>& indices, int64_t count, bool drop_last_count = false) {
    ByteWriter out;
    out.PutArray(indices.data(), indices.size());
    const std::vector<uint64_t> words(indices.size() * kWords, 0);
    out.PutArray(words.data(), words.size());
    std::vector<int64_t> counts(indices.size(), count);
    out.PutArray(counts.data(), drop_last_count ? counts.size() - 1 : counts.size());
    return out.Take();
  };
  ExactSparseUnion state(100, ExactSums::Grid::kFloat32, pool);
  SparseBatch<float> batch;
  batch.Add({3, 50}, {1.5f, 2.5f}, 1);
  batch.Seal(Encoding::kSparse);
  state.AddBatch(batch.views);
  const std::string before = Serialized(state);
  const struct {
    std::string bytes;
    const char* what;
  } bad[] = {
      {layout({4, 4}, 1), "not increasing"},
      {layout({4, 2}, 1), "not increasing"},
      {layout({4, 100}, 1), "out of range"},
      {layout({-1}, 1), "out of range"},
      {layout({4, 5}, 0), "count of 0"},
      {layout({4, 5}, 3), "count of 3"},
      {layout({4, 5}, 1, true), "counts has 1 elements"},
      {layout({4, 5}, 1).substr(0, 40), "truncated"},
  };
  for (const auto& [bytes, what] : bad) {
    SCOPED_TRACE(what);
    ByteReader in(bytes);
    const absl::Status status = state.DeserializeFrom(in, 2, "field 'w'");
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_EQ(Serialized(state), before);
  }
  const std::string good_bytes = layout({4, 5}, 2);
  ByteReader good(good_bytes);
  const absl::Status read = state.DeserializeFrom(good, 2, "field 'w'");
  ASSERT_TRUE(read.ok()) << read;
  EXPECT_EQ(state.size(), 2u);
}

}  // namespace
}  // namespace fedagg
