// Random batches of COO (and row-sparse) updates for the tests of the CPU backend's
// sparse family (partitioned scatter, row adds, sparse union), and a bit-for-bit
// comparison of their results.
#ifndef FEDAGG_TESTS_CORE_RANDOM_SPARSE_BATCH_H_
#define FEDAGG_TESTS_CORE_RANDOM_SPARSE_BATCH_H_

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "service/core/field_value.h"
#include "tests/core/core_test_util.h"

namespace fedagg::testing {

// A batch of COO (or row-sparse) updates that owns its memory.
template <typename In>
struct SparseBatch {
  std::vector<std::vector<int64_t>> ids;
  std::vector<std::vector<In>> values;  // `width` values per id
  std::vector<double> weights;
  std::vector<FieldValue> fields;
  std::vector<const FieldValue*> views;

  void Add(std::vector<int64_t> update_ids, std::vector<In> update_values, double weight) {
    ids.push_back(std::move(update_ids));
    values.push_back(std::move(update_values));
    weights.push_back(weight);
  }
  // Call once all updates are added (the views point into the vectors).
  void Seal(Encoding encoding) {
    for (size_t u = 0; u < ids.size(); ++u) {
      fields.push_back(FieldValue{encoding, DTypeOf<In>::value, ids[u],
                                  AsBytes(absl::MakeConstSpan(values[u]))});
    }
    for (const FieldValue& f : fields) views.push_back(&f);
  }
};

template <typename In>
In RandomValue(std::mt19937_64& rng) {
  if constexpr (std::is_integral_v<In>) {
    return static_cast<In>(std::uniform_int_distribution<int64_t>(-1000, 1000)(rng));
  } else {
    return FromDouble<In>(std::uniform_real_distribution<double>(-8, 8)(rng));
  }
}

// `updates` random updates of up to `max_entries` entries of `width` values over `rows`
// rows (some empty when max_entries is small); every other update repeats some of its
// indices, and each hits 0 and rows - 1. Sealed.
template <typename In>
SparseBatch<In> RandomBatch(uint64_t seed, int64_t rows, int64_t width, int updates, int64_t max_entries,
                      Encoding encoding = Encoding::kSparse) {
  std::mt19937_64 rng(seed);
  SparseBatch<In> batch;
  for (int u = 0; u < updates; ++u) {
    const int64_t n = std::uniform_int_distribution<int64_t>(0, max_entries)(rng);
    std::vector<int64_t> ids;
    for (int64_t k = 0; k < n; ++k) {
      if (u % 2 == 1 && k > 0 && k % 7 == 0) {
        ids.push_back(ids[static_cast<size_t>(k) / 2]);  // repeated within the update
      } else if (k % 101 == 0) {
        ids.push_back(k % 202 == 0 ? 0 : rows - 1);
      } else {
        ids.push_back(std::uniform_int_distribution<int64_t>(0, rows - 1)(rng));
      }
    }
    std::vector<In> values;
    for (int64_t i = 0; i < n * width; ++i) values.push_back(RandomValue<In>(rng));
    batch.Add(std::move(ids), std::move(values), 0.25 + 0.5 * u);
  }
  batch.Seal(encoding);
  return batch;
}

template <typename T>
::testing::AssertionResult BitIdentical(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " vs " << b.size() << " elements";
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) {
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i];
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace fedagg::testing

#endif  // FEDAGG_TESTS_CORE_RANDOM_SPARSE_BATCH_H_
