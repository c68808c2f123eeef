// ThrustFieldReducer on Thrust's OpenMP system: the check of a staged batch's indices
// against the field, which no host pass does before it (batch_packer.h) — a part with an
// index outside [0, rows) adds nothing — and each entry's update, which the reducer finds
// from the batch's offsets (updates without entries included), for each kind of entries
// and each path (the CSR SpMV of sparse_sum, the sort and segment of row-sparse sums and
// integer sums, the union of sparse_sum_sparse).
#include "portable/thrust_field_reducer.h"

#include <cstdint>
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
  ReducerSpec spec;
  spec.rows = kRows;
  spec.in = InType::kF32;
  spec.kind = ReducerKind::kScatter;
  spec.keeps_counts = true;
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
  ReducerSpec spec;
  spec.rows = kRows;
  spec.in = InType::kF32;
  spec.kind = ReducerKind::kScatter;
  spec.keeps_counts = true;
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

}  // namespace
}  // namespace fedagg::portable
