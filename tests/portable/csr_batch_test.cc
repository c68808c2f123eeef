// CsrBatch on Thrust's OpenMP system: offsets from the entries' updates (empty updates
// included), columns increasing within a row, an update's repeated coordinates summed,
// values widened, the 32- / 64-bit choice, and 64-bit columns beyond 2^31; a batch whose
// rows increase taken as staged (borrowed whole when 64-bit and of the accumulator's type).
#include "portable/csr_batch.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "portable/omp_system.h"
#include "portable/portable_math.h"

namespace fedagg::portable {
namespace {

// A host copy of a built matrix.
template <typename Index, typename T>
struct Built {
  std::vector<Index> offsets;
  std::vector<Index> columns;
  std::vector<T> values;
};

template <typename Index, typename T>
Built<Index, T> Copy(const CsrMatrix<Index, T>& a) {
  return Built<Index, T>{std::vector<Index>(a.row_offsets, a.row_offsets + a.rows + 1),
                         std::vector<Index>(a.column_indices, a.column_indices + a.nnz),
                         std::vector<T>(a.values, a.values + a.nnz)};
}

// Entries of a batch on the host (OmpSystem's memory is host memory).
template <typename In>
struct Entries {
  std::vector<int64_t> ids;
  std::vector<int32_t> update;
  std::vector<In> values;
  mutable std::vector<int64_t> offsets;  // made by Batch from `update`

  // `rows_increase`: what the caller found (every update's ids strictly increasing).
  CooBatch<In> Batch(int64_t updates, int64_t columns, bool rows_increase = false) const {
    offsets.clear();
    for (int64_t u = 0; u <= updates; ++u) {
      offsets.push_back(std::lower_bound(update.begin(), update.end(), u) - update.begin());
    }
    return CooBatch<In>{ids.data(),  offsets.data(), values.data(), static_cast<int64_t>(ids.size()),
                        updates,     columns,        rows_increase, update.data()};
  }
};

template <typename Index>
class CsrBatchTest : public ::testing::Test {};
using Indices = ::testing::Types<int32_t, int64_t>;
TYPED_TEST_SUITE(CsrBatchTest, Indices);

TYPED_TEST(CsrBatchTest, IncreasingRowsAreTakenAsTheyAreWithEmptyUpdates) {
  // Updates 0 and 3 have no entry; 1 and 2 have increasing indices.
  const Entries<float> e{{2, 5, 9, 0, 7}, {1, 1, 1, 2, 2}, {1.5f, 2, 3, 4, 5}};
  CsrBatch<OmpSystem, double> csr;
  const Built<TypeParam, double> a =
      Copy(csr.template Build<TypeParam>(e.Batch(/*updates=*/4, /*columns=*/10, /*rows_increase=*/true)));
  EXPECT_EQ(a.offsets, (std::vector<TypeParam>{0, 0, 3, 5, 5}));
  EXPECT_EQ(a.columns, (std::vector<TypeParam>{2, 5, 9, 0, 7}));
  EXPECT_EQ(a.values, (std::vector<double>{1.5, 2, 3, 4, 5}));
  // Taken as they are, or sorted: the same matrix.
  const Built<TypeParam, double> sorted = Copy(csr.template Build<TypeParam>(e.Batch(4, 10, false)));
  EXPECT_EQ(sorted.offsets, a.offsets);
  EXPECT_EQ(sorted.columns, a.columns);
  EXPECT_EQ(sorted.values, a.values);
}

TEST(CsrBatchBorrowTest, IncreasingRowsOfAccValuesAreTheMatrixWithoutACopy) {
  const Entries<float> e{{2, 5, 9, 0, 7}, {0, 0, 0, 2, 2}, {1.5f, 2, 3, 4, 5}};
  CsrBatch<OmpSystem, float> csr;
  const CooBatch<float> batch = e.Batch(3, 10, true);
  const CsrMatrix<int64_t, float> a = csr.Build<int64_t>(batch);
  EXPECT_EQ(a.row_offsets, batch.offsets);
  EXPECT_EQ(a.column_indices, batch.ids);
  EXPECT_EQ(a.values, batch.values);
  EXPECT_EQ(a.nnz, 5);
  EXPECT_EQ(csr.Bytes(), 0u) << "a borrowed batch needs no vector of its own";
}

TYPED_TEST(CsrBatchTest, UnsortedRowsAreSortedAndRepeatsWithinAnUpdateSummed) {
  // Update 0: 7, 2, 7, 2, 2 (repeats); update 1: empty; update 2: 3, 1; update 3: 7.
  const Entries<float> e{{7, 2, 7, 2, 2, 3, 1, 7}, {0, 0, 0, 0, 0, 2, 2, 3}, {1, 2, 4, 8, 16, 32, 64, 128}};
  CsrBatch<OmpSystem, float> csr;
  const Built<TypeParam, float> a = Copy(csr.template Build<TypeParam>(e.Batch(/*updates=*/4, /*columns=*/8)));
  EXPECT_EQ(a.offsets, (std::vector<TypeParam>{0, 2, 2, 4, 5}));
  EXPECT_EQ(a.columns, (std::vector<TypeParam>{2, 7, 1, 3, 7}));
  EXPECT_EQ(a.values, (std::vector<float>{26, 5, 64, 32, 128}));
}

TYPED_TEST(CsrBatchTest, RepeatedIndexInAnOtherwiseIncreasingUpdateIsSummed) {
  const Entries<int32_t> e{{1, 4, 4, 6}, {0, 0, 0, 1}, {3, 5, 7, 9}};
  CsrBatch<OmpSystem, double> csr;
  const Built<TypeParam, double> a = Copy(csr.template Build<TypeParam>(e.Batch(2, 8)));
  EXPECT_EQ(a.offsets, (std::vector<TypeParam>{0, 2, 3}));
  EXPECT_EQ(a.columns, (std::vector<TypeParam>{1, 4, 6}));
  EXPECT_EQ(a.values, (std::vector<double>{3, 12, 9}));
}

TYPED_TEST(CsrBatchTest, HalfPrecisionValuesAreWidened) {
  // float16 bits: 0x3c00 = 1, 0xc000 = -2, 0x3800 = 0.5.
  const Entries<Half> e{{3, 0, 3}, {0, 0, 0}, {Half{0x3c00}, Half{0xc000}, Half{0x3800}}};
  CsrBatch<OmpSystem, float> csr;
  const Built<TypeParam, float> a = Copy(csr.template Build<TypeParam>(e.Batch(1, 4)));
  EXPECT_EQ(a.columns, (std::vector<TypeParam>{0, 3}));
  EXPECT_EQ(a.values, (std::vector<float>{-2, 1.5f}));
}

TYPED_TEST(CsrBatchTest, ABatchWithoutEntriesHasOnlyEmptyRows) {
  const Entries<float> e;
  CsrBatch<OmpSystem, float> csr;
  const CsrMatrix<TypeParam, float> a = csr.template Build<TypeParam>(e.Batch(3, 8));
  EXPECT_EQ(a.nnz, 0);
  EXPECT_EQ(Copy(a).offsets, (std::vector<TypeParam>{0, 0, 0, 0}));
}

TYPED_TEST(CsrBatchTest, BuildingAgainReusesTheVectors) {
  const Entries<float> first{{5, 1}, {0, 0}, {1, 2}};
  const Entries<float> second{{0, 2, 4}, {0, 1, 1}, {3, 4, 5}};
  CsrBatch<OmpSystem, float> csr;
  csr.template Build<TypeParam>(first.Batch(1, 6));
  const uint64_t bytes = csr.Bytes();
  const Built<TypeParam, float> a = Copy(csr.template Build<TypeParam>(second.Batch(2, 6)));
  EXPECT_EQ(a.offsets, (std::vector<TypeParam>{0, 1, 3}));
  EXPECT_EQ(a.columns, (std::vector<TypeParam>{0, 2, 4}));
  EXPECT_EQ(a.values, (std::vector<float>{3, 4, 5}));
  EXPECT_GE(csr.Bytes(), bytes);
}

TEST(CsrBatchIndexWidthTest, NarrowWhileColumnsAndEntriesFitInt32) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  using Csr = CsrBatch<OmpSystem, float>;
  EXPECT_TRUE(Csr::FitsNarrow(kMax, kMax));
  EXPECT_FALSE(Csr::FitsNarrow(kMax + 1, 10));
  EXPECT_FALSE(Csr::FitsNarrow(10, kMax + 1));
  EXPECT_TRUE(Csr::Fits(1 << 20, int64_t{1} << 40));
  EXPECT_FALSE(Csr::Fits(int64_t{1} << 24, int64_t{1} << 40));
}

TEST(CsrBatchIndexWidthTest, WideColumnsBeyondInt32) {
  constexpr int64_t kColumns = int64_t{1} << 40;
  const Entries<double> e{{kColumns - 1, int64_t{5} << 32, int64_t{5} << 32, 3}, {0, 0, 0, 1}, {1, 2, 3, 4}};
  CsrBatch<OmpSystem, double> csr;
  const Built<int64_t, double> a = Copy(csr.Build<int64_t>(e.Batch(2, kColumns)));
  EXPECT_EQ(a.offsets, (std::vector<int64_t>{0, 2, 3}));
  EXPECT_EQ(a.columns, (std::vector<int64_t>{int64_t{5} << 32, kColumns - 1, 3}));
  EXPECT_EQ(a.values, (std::vector<double>{5, 1, 4}));
}

}  // namespace
}  // namespace fedagg::portable
