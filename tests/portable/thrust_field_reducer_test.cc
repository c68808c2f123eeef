// ThrustFieldReducer on Thrust's OpenMP system: the check of a staged batch's indices
// against the field, which no host pass does before it (batch_packer.h) — a part with an
// index outside [0, rows) adds nothing — and each entry's update, which the reducer finds
// from the batch's offsets (updates without entries included), for each kind of entries
// and each path (the CSR SpMV of sparse_sum, the sort and segment of row-sparse sums and
// integer sums, the union of sparse_sum_sparse); and updates whose indices ascend, added
// one by one with the sort and segment path's sums; and the CSR path taking updates whose
// indices increase strictly as staged, sorting any other batch.
#include "portable/thrust_field_reducer.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "portable/field_reducer.h"
#include "portable/omp_system.h"

namespace fedagg::portable {
namespace {

constexpr int64_t kRows = 10;

// A float32 sparse_mean over kRows coordinates: the CSR path, counts kept.
ReducerSpec SparseMeanSpec() {
  ReducerSpec spec;
  spec.rows = kRows;
  spec.in = InType::kF32;
  spec.kind = ReducerKind::kScatter;
  spec.keeps_counts = true;
  return spec;
}

// Two updates of two entries each, rows of `width` values 1.. (float32, or int32 for
// `integers`); `indices` as given.
struct Staged {
  std::vector<int64_t> indices;
  std::vector<float> floats;
  std::vector<int32_t> integers;
  std::vector<int64_t> update_offsets = {0, 2, 4};
  std::vector<double> weights = {1, 1};

  Staged(std::vector<int64_t> ids, const ReducerSpec& spec) : indices(std::move(ids)) {
    for (int64_t i = 0; i < 4 * spec.row_width; ++i) {
      if (spec.in == InType::kI32) {
        integers.push_back(static_cast<int32_t>(1 + i));
      } else {
        floats.push_back(static_cast<float>(1 + i));
      }
    }
  }
  StagedBatch View() const {
    StagedBatch batch;
    batch.updates = 2;
    batch.entries = 4;
    batch.values = integers.empty() ? static_cast<const void*>(floats.data()) : integers.data();
    batch.indices = indices.data();
    batch.update_offsets = update_offsets.data();
    batch.weights = weights.data();
    return batch;
  }
};

template <typename Acc>
void ExpectOutsideIndexAddsNothing(const ReducerSpec& spec, const char* what) {
  ThrustFieldReducer<OmpSystem, Acc> reducer(spec);
  ASSERT_TRUE(reducer.Accumulate(Staged({1, 3, 3, 7}, spec).View()).ok()) << what;
  HostState<Acc> before;
  ASSERT_TRUE(reducer.Save(&before).ok()) << what;
  for (const int64_t outside : {kRows, int64_t{-1}}) {
    const Outcome refused = reducer.Accumulate(Staged({2, 4, 5, outside}, spec).View());
    EXPECT_EQ(refused.code, Outcome::Code::kInvalidArgument) << what;
    EXPECT_NE(refused.message.find("1 of the batch's indices lie outside the field's 10 rows"), std::string::npos)
        << what << ": " << refused.message;
    HostState<Acc> after;
    ASSERT_TRUE(reducer.Save(&after).ok()) << what;
    EXPECT_EQ(after.values, before.values) << what << ": part of the refused batch was added";
    EXPECT_EQ(after.counts, before.counts) << what;
    EXPECT_EQ(after.indices, before.indices) << what;
  }
}

TEST(ThrustFieldReducerTest, AnIndexOutsideTheFieldAddsNothingOfItsPart) {
  ReducerSpec spec = SparseMeanSpec();
  ExpectOutsideIndexAddsNothing<double>(spec, "sparse_mean (CSR and SpMV)");
  spec.in = InType::kI32;
  ExpectOutsideIndexAddsNothing<int64_t>(spec, "integer sparse sum (sort and segment)");
  spec.in = InType::kF32;
  spec.row_width = 3;
  ExpectOutsideIndexAddsNothing<float>(spec, "row_sparse_mean (sort and segment)");
  spec.row_width = 1;
  spec.keeps_counts = false;
  spec.kind = ReducerKind::kUnion;
  ExpectOutsideIndexAddsNothing<double>(spec, "sparse_sum_sparse (union)");
}

// Updates without entries (the first, one between, the last) own none: every entry is
// added for the update whose offsets hold it — with its weight, and counted once for it —
// on each path (CSR and SpMV, sort and segment, union).
template <typename Acc>
void ExpectEntriesOfTheirOwnUpdates(const ReducerSpec& spec, const char* what) {
  const std::vector<int64_t> indices = {2, 5, 2, 9};
  const std::vector<float> values = {1, 2, 3, 4};
  const std::vector<int32_t> integers = {1, 2, 3, 4};
  const std::vector<int64_t> offsets = {0, 0, 2, 2, 4, 4};  // updates 0, 2 and 4 are empty
  const std::vector<double> weights = {100, 2, 1000, 3, 10000};
  StagedBatch batch;
  batch.updates = 5;
  batch.entries = 4;
  batch.values = spec.in == InType::kI32 ? static_cast<const void*>(integers.data()) : values.data();
  batch.indices = indices.data();
  batch.update_offsets = offsets.data();
  batch.weights = weights.data();
  ThrustFieldReducer<OmpSystem, Acc> reducer(spec);
  ASSERT_TRUE(reducer.Accumulate(batch).ok()) << what;
  HostState<Acc> state;
  ASSERT_TRUE(reducer.Save(&state).ok()) << what;
  const bool weighted = spec.op == ReducerOp::kWeightedSum;
  // Index 2: 1 (update 1) + 3 (update 3); 5: 2 (update 1); 9: 4 (update 3).
  const std::map<int64_t, double> expected = {{2, weighted ? 1 * 2 + 3 * 3 : 4}, {5, weighted ? 2 * 2 : 2},
                                              {9, weighted ? 4 * 3 : 4}};
  const std::map<int64_t, int64_t> expected_counts = {{2, 2}, {5, 1}, {9, 1}};
  std::map<int64_t, double> got;
  std::map<int64_t, int64_t> got_counts;
  if (spec.kind == ReducerKind::kUnion) {
    for (size_t i = 0; i < state.indices.size(); ++i) {
      got[state.indices[i]] = static_cast<double>(state.values[i]);
      got_counts[state.indices[i]] = state.counts[i];
    }
  } else {
    for (int64_t r = 0; r < kRows; ++r) {
      if (state.values[static_cast<size_t>(r)] != Acc{0}) got[r] = static_cast<double>(state.values[static_cast<size_t>(r)]);
      if (!state.counts.empty() && state.counts[static_cast<size_t>(r)] != 0) got_counts[r] = state.counts[static_cast<size_t>(r)];
    }
  }
  EXPECT_EQ(got, expected) << what;
  if (spec.keeps_counts || spec.kind == ReducerKind::kUnion) {
    EXPECT_EQ(got_counts, expected_counts) << what;
  }
  if (spec.keeps_weight_sums) {
    EXPECT_EQ(state.weight_sums[2], 5.0) << what;  // updates 1 and 3: 2 + 3
    EXPECT_EQ(state.weight_sums[9], 3.0) << what;
  }
}

TEST(ThrustFieldReducerTest, UpdatesWithoutEntriesOwnNone) {
  ReducerSpec spec = SparseMeanSpec();
  ExpectEntriesOfTheirOwnUpdates<double>(spec, "sparse_mean (CSR and SpMV)");
  spec.op = ReducerOp::kWeightedSum;
  spec.keeps_weight_sums = true;
  ExpectEntriesOfTheirOwnUpdates<double>(spec, "sparse_weighted_mean (CSR and SpMV)");
  spec.in = InType::kI32;
  ExpectEntriesOfTheirOwnUpdates<int64_t>(spec, "integer sparse_weighted_mean (sort and segment)");
  spec.op = ReducerOp::kSum;
  spec.keeps_weight_sums = false;
  ExpectEntriesOfTheirOwnUpdates<int64_t>(spec, "integer sparse_mean (sort and segment)");
  spec.in = InType::kF32;
  spec.keeps_counts = false;
  spec.kind = ReducerKind::kUnion;
  ExpectEntriesOfTheirOwnUpdates<double>(spec, "sparse_sum_sparse (union)");
}

// A batch of sparse_mean entries given update by update, values k / 4 (exact sums).
struct UpdatesOf {
  std::vector<int64_t> indices;
  std::vector<int64_t> offsets = {0};
  std::vector<float> values;
  std::vector<double> weights;

  explicit UpdatesOf(const std::vector<std::vector<int64_t>>& updates) {
    for (const std::vector<int64_t>& ids : updates) {
      for (const int64_t id : ids) {
        indices.push_back(id);
        values.push_back(0.25f * static_cast<float>(indices.size()));
      }
      offsets.push_back(static_cast<int64_t>(indices.size()));
      weights.push_back(1);
    }
  }
  StagedBatch View() const {
    StagedBatch batch;
    batch.updates = static_cast<int64_t>(weights.size());
    batch.entries = static_cast<int64_t>(indices.size());
    batch.values = values.data();
    batch.indices = indices.data();
    batch.update_offsets = offsets.data();
    batch.weights = weights.data();
    return batch;
  }
};

// The CSR path takes a batch as staged when every update's indices increase strictly,
// whatever the order between updates (one pass finds it), and sorts it otherwise (an
// index repeated, or falling, within one update): the sums and the counts of distinct
// updates are a plain loop's either way.
TEST(ThrustFieldReducerTest, CsrPathTakesIncreasingUpdatesAsStagedAndSortsTheRest) {
  const ReducerSpec spec = SparseMeanSpec();
  struct Case {
    const char* what;
    std::vector<std::vector<int64_t>> updates;
    bool as_staged;
  };
  const std::vector<Case> cases = {
      {"increasing, falling between updates", {{1, 4, 7}, {}, {0, 4, 9}, {2}}, true},
      {"increasing, the same index ending one update and starting the next", {{1, 4}, {4, 6}}, true},
      {"an empty first update", {{}, {3, 8}}, true},
      {"a repeat within an update", {{1, 4, 4, 7}, {2}}, false},
      {"a fall within an update", {{1, 7, 4}, {2, 3}}, false},
  };
  for (const Case& c : cases) {
    const UpdatesOf batch(c.updates);
    std::vector<float> expected(kRows, 0);
    std::vector<int64_t> expected_counts(kRows, 0);
    for (size_t u = 0; u + 1 < batch.offsets.size(); ++u) {
      std::vector<bool> touched(kRows, false);
      for (int64_t k = batch.offsets[u]; k < batch.offsets[u + 1]; ++k) {
        expected[static_cast<size_t>(batch.indices[k])] += batch.values[k];
        touched[static_cast<size_t>(batch.indices[k])] = true;
      }
      for (int64_t r = 0; r < kRows; ++r) expected_counts[r] += touched[r] ? 1 : 0;
    }
    // The same entries with each update's indices reversed: none increases, so the
    // batch is sorted, which makes the sort's vectors (entries' updates, keys, order).
    std::vector<std::vector<int64_t>> reversed = c.updates;
    for (std::vector<int64_t>& ids : reversed) std::reverse(ids.begin(), ids.end());
    ThrustFieldReducer<OmpSystem, float> reducer(spec), sorted(spec);
    ASSERT_TRUE(reducer.Accumulate(batch.View()).ok()) << c.what;
    const UpdatesOf reversed_batch(reversed);
    ASSERT_TRUE(sorted.Accumulate(reversed_batch.View()).ok()) << c.what;
    HostState<float> state, sorted_state;
    ASSERT_TRUE(reducer.Save(&state).ok()) << c.what;
    ASSERT_TRUE(sorted.Save(&sorted_state).ok()) << c.what;
    EXPECT_EQ(state.values, expected) << c.what;
    EXPECT_EQ(state.counts, expected_counts) << c.what;
    EXPECT_EQ(sorted_state.counts, expected_counts) << c.what << ", reversed";
    if (c.as_staged) {
      EXPECT_LT(reducer.HostBytes(), sorted.HostBytes()) << c.what << ": sorted, not taken as staged";
    } else {
      EXPECT_EQ(reducer.HostBytes(), sorted.HostBytes()) << c.what << ": not sorted";
    }
  }
}

// A batch of four updates over `rows` rows of `width` values (the second update empty),
// each update's indices ascending with some repeated, values not exact in binary.
struct AscendingBatch {
  std::vector<int64_t> indices;
  std::vector<float> floats;
  std::vector<int32_t> integers;
  std::vector<int64_t> update_offsets = {0};
  std::vector<double> weights = {1, 2, 3, 4};

  explicit AscendingBatch(const ReducerSpec& spec) {
    for (int64_t u = 0; u < 4; ++u) {
      for (int64_t r = 0; u != 1 && r < spec.rows; ++r) {
        if ((r * 7 + u) % 4 == 0) continue;
        const int copies = r % 13 == u ? 2 : 1;  // an update may repeat an index
        for (int c = 0; c < copies; ++c) indices.push_back(r);
      }
      update_offsets.push_back(static_cast<int64_t>(indices.size()));
    }
    for (size_t i = 0; i < indices.size() * static_cast<size_t>(spec.row_width); ++i) {
      floats.push_back(0.1f * static_cast<float>(i % 1000) - 7.3f);
      integers.push_back(static_cast<int32_t>(i % 101) - 50);
    }
  }
  StagedBatch View(const ReducerSpec& spec, bool ascend) const {
    StagedBatch batch;
    batch.updates = 4;
    batch.entries = static_cast<int64_t>(indices.size());
    batch.values = spec.in == InType::kI32 ? static_cast<const void*>(integers.data()) : floats.data();
    batch.indices = indices.data();
    batch.update_offsets = update_offsets.data();
    batch.weights = weights.data();
    batch.host_update_offsets = update_offsets.data();
    batch.updates_ascend = ascend;
    return batch;
  }
};

// Updates whose indices ascend are added one by one, with no sort: the state is that of
// the sort and segment path, bit for bit (values, counts, weight sums), over two batches.
template <typename Acc>
void ExpectOneByOneAsTheSort(const ReducerSpec& spec, const char* what) {
  const AscendingBatch batch(spec);
  ThrustFieldReducer<OmpSystem, Acc> one_by_one(spec), sorted(spec);
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(one_by_one.Accumulate(batch.View(spec, true)).ok()) << what;
    ASSERT_TRUE(sorted.Accumulate(batch.View(spec, false)).ok()) << what;
  }
  // The sort's buffers (ids, order, segments) are made only on its path.
  EXPECT_LT(one_by_one.HostBytes(), sorted.HostBytes()) << what << ": the batch was sorted";
  HostState<Acc> got, want;
  ASSERT_TRUE(one_by_one.Save(&got).ok()) << what;
  ASSERT_TRUE(sorted.Save(&want).ok()) << what;
  ASSERT_EQ(got.values.size(), want.values.size()) << what;
  for (size_t i = 0; i < got.values.size(); ++i) {
    ASSERT_EQ(std::memcmp(&got.values[i], &want.values[i], sizeof(Acc)), 0)
        << what << ": element " << i << " is " << got.values[i] << ", the sort's " << want.values[i];
  }
  EXPECT_EQ(got.counts, want.counts) << what;
  EXPECT_EQ(got.weight_sums, want.weight_sums) << what;
  EXPECT_NE(want.values, std::vector<Acc>(want.values.size(), Acc{0})) << what << ": nothing was added";
}

TEST(ThrustFieldReducerTest, UpdatesWhoseIndicesAscendAreAddedOneByOneWithTheSortsSums) {
  ReducerSpec spec;
  spec.kind = ReducerKind::kScatter;
  spec.in = InType::kF32;
  spec.rows = 128;
  spec.row_width = 96;  // not a whole number of a CPU work item's runs
  ExpectOneByOneAsTheSort<float>(spec, "row_sparse_sum");
  spec.keeps_counts = true;
  ExpectOneByOneAsTheSort<double>(spec, "row_sparse_mean, float64 accumulation");
  spec.in = InType::kI32;
  spec.rows = 20000;
  spec.row_width = 1;
  spec.op = ReducerOp::kWeightedSum;
  spec.keeps_weight_sums = true;
  ExpectOneByOneAsTheSort<int64_t>(spec, "integer sparse_weighted_mean");
  spec.op = ReducerOp::kSum;
  spec.keeps_weight_sums = false;
  ExpectOneByOneAsTheSort<int64_t>(spec, "integer sparse_mean");
}

}  // namespace
}  // namespace fedagg::portable
