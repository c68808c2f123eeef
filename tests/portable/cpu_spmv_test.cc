// SpmvTransposeOnCpu against a plain serial loop: bitwise equal (both add each column's
// entries in row order), for both index widths and value types, any thread count, y in
// one tile or several.
#include "portable/cpu_spmv.h"

#include <omp.h>

#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "portable/csr_matrix.h"

namespace fedagg::portable {
namespace {

template <typename Index, typename T>
struct HostCsr {
  int64_t rows = 0;
  int64_t columns = 0;
  std::vector<Index> offsets{0};
  std::vector<Index> indices;
  std::vector<T> values;

  CsrMatrix<Index, T> View() const {
    return CsrMatrix<Index, T>{rows, columns, static_cast<int64_t>(values.size()), offsets.data(),
                               indices.data(), values.data()};
  }
};

// Rows with increasing columns, about one in `sparsity` present, non-integer values.
template <typename Index, typename T>
HostCsr<Index, T> RandomCsr(int64_t rows, int64_t columns, int sparsity, uint32_t seed) {
  std::mt19937 rng(seed);
  HostCsr<Index, T> a;
  a.rows = rows;
  a.columns = columns;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < columns; ++c) {
      if (rng() % sparsity != 0) continue;
      a.indices.push_back(static_cast<Index>(c));
      a.values.push_back(static_cast<T>(std::uniform_real_distribution<double>(-3, 3)(rng)));
    }
    a.offsets.push_back(static_cast<Index>(a.indices.size()));
  }
  return a;
}

template <typename Index, typename T>
std::vector<T> SerialProduct(const HostCsr<Index, T>& a, const std::vector<T>& x, std::vector<T> y) {
  for (int64_t r = 0; r < a.rows; ++r) {
    for (Index k = a.offsets[r]; k < a.offsets[r + 1]; ++k) y[a.indices[k]] += a.values[k] * x[r];
  }
  return y;
}

template <typename Pair>
class CpuSpmvTest : public ::testing::Test {};
using Types = ::testing::Types<std::pair<int32_t, float>, std::pair<int32_t, double>, std::pair<int64_t, float>,
                               std::pair<int64_t, double>>;
TYPED_TEST_SUITE(CpuSpmvTest, Types);

TYPED_TEST(CpuSpmvTest, MatchesSerialLoopBitwiseForAnyThreadCount) {
  using Index = typename TypeParam::first_type;
  using T = typename TypeParam::second_type;
  const int initial_threads = omp_get_max_threads();
  // 300,000 columns: several tiles of y (cpu_spmv.h), rows crossing from one to the next.
  for (const int64_t columns : {int64_t{1}, int64_t{3}, int64_t{1000}, int64_t{300000}}) {
    const int sparsity = columns > 1000 ? 50 : 3;
    const HostCsr<Index, T> a = RandomCsr<Index, T>(/*rows=*/17, columns, sparsity, /*seed=*/11);
    std::vector<T> x(17), start(static_cast<size_t>(columns));
    for (size_t r = 0; r < x.size(); ++r) x[r] = static_cast<T>(0.25 * static_cast<double>(r) - 1.5);
    for (size_t c = 0; c < start.size(); ++c) start[c] = static_cast<T>(0.1 * static_cast<double>(c));
    const std::vector<T> expected = SerialProduct(a, x, start);
    for (const int threads : {1, 2, 5}) {
      omp_set_num_threads(threads);
      std::vector<T> y = start;
      SpmvTransposeOnCpu(a.View(), x.data(), y.data());
      EXPECT_EQ(y, expected) << columns << " columns, " << threads << " threads";
    }
  }
  omp_set_num_threads(initial_threads);
}

TYPED_TEST(CpuSpmvTest, EmptyRowsAndEmptyMatrixAddNothing) {
  using Index = typename TypeParam::first_type;
  using T = typename TypeParam::second_type;
  HostCsr<Index, T> a;
  a.rows = 3;
  a.columns = 4;
  a.offsets = {0, 0, 2, 2};
  a.indices = {1, 3};
  a.values = {2, 5};
  const std::vector<T> x = {7, 3, 11};
  std::vector<T> y = {1, 1, 1, 1};
  SpmvTransposeOnCpu(a.View(), x.data(), y.data());
  EXPECT_EQ(y, (std::vector<T>{1, 7, 1, 16}));
  HostCsr<Index, T> empty;
  empty.rows = 3;
  empty.columns = 4;
  empty.offsets = {0, 0, 0, 0};
  SpmvTransposeOnCpu(empty.View(), x.data(), y.data());
  EXPECT_EQ(y, (std::vector<T>{1, 7, 1, 16}));
}

}  // namespace
}  // namespace fedagg::portable
