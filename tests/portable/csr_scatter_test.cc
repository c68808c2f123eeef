// CsrScatter on Thrust's OpenMP system against a plain loop: values (unweighted and
// weighted), counts of distinct updates (an update repeating a coordinate counts once)
// and weight sums, added onto existing state, for batches sorted here and batches whose
// rows increase as staged; the index width the SpMV gets; and the rule that picks the CSR
// path.
#include "portable/csr_scatter.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "portable/csr_matrix.h"
#include "portable/field_reducer.h"
#include "portable/omp_system.h"

namespace fedagg::portable {
namespace {

constexpr int64_t kColumns = 50;
constexpr int64_t kUpdates = 6;

struct Batch {
  std::vector<int64_t> ids;
  std::vector<int32_t> update;
  std::vector<int64_t> offsets = {0};
  std::vector<float> values;
  std::vector<double> weights;
};

// Random entries, one update empty; values and weights multiples of 1/4, so every sum
// is exact. `increasing`: each update's ids strictly increase (as clients send them);
// otherwise they are in random order, with repeats.
Batch RandomBatch(uint32_t seed, bool increasing) {
  std::mt19937 rng(seed);
  Batch b;
  for (int32_t u = 0; u < kUpdates; ++u) {
    b.weights.push_back(0.25 * static_cast<double>(1 + rng() % 8));
    std::vector<int64_t> ids;
    const int n = u == 2 ? 0 : static_cast<int>(rng() % 20);
    for (int k = 0; k < n; ++k) ids.push_back(static_cast<int64_t>(rng() % kColumns));
    if (increasing) {
      std::sort(ids.begin(), ids.end());
      ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    }
    for (const int64_t id : ids) {
      b.ids.push_back(id);
      b.update.push_back(u);
      b.values.push_back(0.25f * static_cast<float>(static_cast<int>(rng() % 17) - 8));
    }
    b.offsets.push_back(static_cast<int64_t>(b.ids.size()));
  }
  return b;
}

TEST(CsrScatterTest, ValuesCountsAndWeightSumsMatchAPlainLoop) {
  for (const bool increasing : {false, true}) {
    for (const bool weighted : {false, true}) {
      CsrScatter<OmpSystem, double> scatter;
      std::vector<double> values(kColumns, 1), weight_sums(kColumns, 0.5);
      std::vector<int64_t> counts(kColumns, 3);
      std::vector<double> expected_values = values, expected_weight_sums = weight_sums;
      std::vector<int64_t> expected_counts = counts;
      for (uint32_t seed : {1u, 2u, 3u}) {
        const Batch b = RandomBatch(seed, increasing);
        std::vector<std::set<int64_t>> touched(kUpdates);
        for (size_t k = 0; k < b.ids.size(); ++k) {
          const int32_t u = b.update[k];
          expected_values[b.ids[k]] += (weighted ? b.weights[u] : 1.0) * b.values[k];
          touched[u].insert(b.ids[k]);
        }
        for (int32_t u = 0; u < kUpdates; ++u) {
          for (int64_t c : touched[u]) {
            expected_counts[c] += 1;
            expected_weight_sums[c] += b.weights[u];
          }
        }
        const CooBatch<float> coo{b.ids.data(), b.offsets.data(), b.values.data(), static_cast<int64_t>(b.ids.size()),
                                  kUpdates,     kColumns,         increasing,    b.update.data()};
        const Outcome done = scatter.Add(
            coo, ScatterTargets<double>{values.data(), counts.data(), weight_sums.data(),
                                        weighted ? b.weights.data() : nullptr, b.weights.data()});
        ASSERT_TRUE(done.ok()) << done.message;
      }
      const char* what = increasing ? "increasing rows" : "rows sorted here";
      EXPECT_EQ(values, expected_values) << (weighted ? "weighted, " : "unweighted, ") << what;
      EXPECT_EQ(counts, expected_counts) << what;
      EXPECT_EQ(weight_sums, expected_weight_sums) << what;
    }
  }
}

TEST(CsrScatterTest, StateNotKeptIsNotTouched) {
  CsrScatter<OmpSystem, float> scatter;
  const std::vector<int64_t> ids = {4, 1, 4};
  const std::vector<int32_t> update = {0, 0, 1};
  const std::vector<int64_t> offsets = {0, 2, 3};
  const std::vector<float> in = {2, 3, 5};
  std::vector<float> values(6, 0);
  const Outcome done = scatter.Add(CooBatch<float>{ids.data(), offsets.data(), in.data(), 3, 2, 6, false, update.data()},
                                   ScatterTargets<float>{values.data()});
  ASSERT_TRUE(done.ok()) << done.message;
  EXPECT_EQ(values, (std::vector<float>{0, 3, 0, 0, 7, 0}));
}

// OmpSystem, recording the index width the SpMV gets, as a system whose 64-bit SpMV is
// as reproducible as its 32-bit one (OmpSystem's own) or not (the cuda backend's).
template <bool kWideReproducible>
struct IndexWidthRecordingSystem : OmpSystem {
  static constexpr bool kWideSpmvReproducible = kWideReproducible;
  static inline size_t index_bytes = 0;
  template <typename Index, typename T>
  static Outcome SpmvTranspose(const CsrMatrix<Index, T>& a, const T* x, T* y) {
    index_bytes = sizeof(Index);
    return OmpSystem::SpmvTranspose(a, x, y);
  }
};

template <typename System>
size_t IndexBytesFor(bool rows_increase) {
  const std::vector<int64_t> ids = {1, 4, 2};
  const std::vector<int32_t> update = {0, 0, 1};
  const std::vector<int64_t> offsets = {0, 2, 3};
  const std::vector<float> in = {2, 3, 5};
  std::vector<float> values(6, 0);
  CsrScatter<System, float> scatter;
  const Outcome done = scatter.Add(CooBatch<float>{ids.data(), offsets.data(), in.data(), 3, 2, 6, rows_increase,
                                                   update.data()},
                                   ScatterTargets<float>{values.data()});
  EXPECT_TRUE(done.ok()) << done.message;
  EXPECT_EQ(values, (std::vector<float>{0, 2, 5, 0, 3, 0}));
  return System::index_bytes;
}

// A batch whose rows increase goes to the SpMV as staged, with 64-bit indices, only where
// that gives the same bits as 32-bit ones; otherwise, and for a batch sorted here, the
// indices are 32-bit when they fit.
TEST(CsrScatterTest, IncreasingRowsKeepTheir64BitIndicesOnlyWhereTheSpmvIsAsReproducible) {
  EXPECT_EQ(IndexBytesFor<IndexWidthRecordingSystem<true>>(true), sizeof(int64_t));
  EXPECT_EQ(IndexBytesFor<IndexWidthRecordingSystem<true>>(false), sizeof(int32_t));
  EXPECT_EQ(IndexBytesFor<IndexWidthRecordingSystem<false>>(true), sizeof(int32_t));
  EXPECT_EQ(IndexBytesFor<IndexWidthRecordingSystem<false>>(false), sizeof(int32_t));
}

TEST(CsrScatterTest, RuleTakesFloatingScattersOfRowWidthOne) {
  ReducerSpec spec;
  spec.kind = ReducerKind::kScatter;
  spec.rows = 1000;
  spec.row_width = 1;
  EXPECT_TRUE((CsrScatter<OmpSystem, float>::Applies(spec, 16)));
  EXPECT_TRUE((CsrScatter<OmpSystem, double>::Applies(spec, 16)));
  EXPECT_FALSE((CsrScatter<OmpSystem, int64_t>::Applies(spec, 16))) << "integer sums stay bit-exact";
  spec.row_width = 8;
  EXPECT_FALSE((CsrScatter<OmpSystem, float>::Applies(spec, 16))) << "row-sparse rows are copied whole";
  spec.row_width = 1;
  spec.kind = ReducerKind::kUnion;
  EXPECT_FALSE((CsrScatter<OmpSystem, float>::Applies(spec, 16))) << "sparse_sum_sparse keeps a union";
  spec.kind = ReducerKind::kScatter;
  spec.rows = int64_t{1} << 40;
  EXPECT_FALSE((CsrScatter<OmpSystem, float>::Applies(spec, int64_t{1} << 24))) << "no int64 row-major key";
}

}  // namespace
}  // namespace fedagg::portable
