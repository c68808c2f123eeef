// ThrustFieldReducer on Thrust's OpenMP system: the check of a staged batch's indices
// against the field, which no host pass does before it (batch_packer.h). A part with an
// index outside [0, rows) adds nothing, for each kind of entries and each path (the CSR
// SpMV of sparse_sum, the sort and segment of row-sparse sums and integer sums, the
// union of sparse_sum_sparse).
#include "portable/thrust_field_reducer.h"

#include <cstdint>
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

}  // namespace
}  // namespace fedagg::portable
