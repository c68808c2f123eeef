// ExactSums: an array of exact sums of floating-point numbers, for deterministic
// aggregations (ReductionOptions::deterministic). Each sum is a fixed-point number of
// `WordsOf(grid)` 64-bit words in two's complement whose least significant bit is the grid's
// smallest step, so adding is exact and the order of additions cannot change a sum:
//   kFloat32 grid — steps of 2^-149 (float32's smallest subnormal), 6 words: every float32
//     value, and every float64 product of a float32 value and a weight in fedagg's float32
//     weight range, summed 2^63 times, fits;
//   kFloat64 grid — steps of 2^-1074 (float64's smallest subnormal), 34 words: every finite
//     float64, summed 2^63 times, fits.
// A number added that is finer than the grid (a weighted product on the float32 grid) is
// first rounded to it, to nearest, ties to even — the same way wherever it is added, so
// sums stay independent of order. Rounded() gives the float64 nearest to a sum (ties to
// even), which is how a deterministic field's result is made (docs/SEMANTICS.md).
#ifndef FEDAGG_SERVICE_CORE_EXACT_SUMS_H_
#define FEDAGG_SERVICE_CORE_EXACT_SUMS_H_

#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "service/core/byte_codec.h"
#include "service/core/dtype.h"

namespace fedagg {

class ExactSums {
 public:
  enum class Grid : uint8_t { kFloat32, kFloat64 };

  // `size` sums, all 0.
  ExactSums(Grid grid, int64_t size);

  // The grid of a field accumulated in `accumulation` (float32 or float64).
  static Grid GridFor(DType accumulation) {
    return accumulation == DType::kFloat32 ? Grid::kFloat32 : Grid::kFloat64;
  }
  // Words of one sum on `grid`, and the bytes it takes.
  static int WordsOf(Grid grid);
  static uint64_t BytesPerSum(Grid grid) { return static_cast<uint64_t>(WordsOf(grid)) * sizeof(uint64_t); }

  Grid grid() const { return grid_; }
  int64_t size() const { return static_cast<int64_t>(state_.size()) / words_; }
  // Makes room for `size` sums; new ones are 0.
  void Resize(int64_t size);

  // sums[i] += value. `value` must be finite, and within the grid's range: below 2^170 in
  // magnitude on a float32 grid (float32 values times weights up to 2^40).
  void Add(int64_t i, double value);
  // Asks the CPU to bring sums[i] into the cache for a coming Add (the sparse family's
  // scatter: each entry's sum is elsewhere in a large state).
  void Prefetch(int64_t i) const {
    __builtin_prefetch(sum(i), 1);
    __builtin_prefetch(sum(i) + words_ - 1, 1);
  }
  // sums[i] += other[j]; `other` must be on the same grid.
  void AddSum(int64_t i, const ExactSums& other, int64_t j);
  // sums[i] = other[j] (`other` on the same grid; may be this one, with i != j).
  void Copy(int64_t i, const ExactSums& other, int64_t j) {
    std::memcpy(sum(i), other.sum(j), static_cast<size_t>(words_) * sizeof(uint64_t));
  }
  // The float64 nearest to sums[i], ties to even (+-Inf beyond float64's range).
  double Rounded(int64_t i) const;

  // The words of every sum, in order, after their count: the partial-aggregate format's
  // layout.
  void SerializeTo(ByteWriter& out) const;
  // Reads `size()` sums written by SerializeTo; DATA_LOSS when the input is short.
  absl::Status DeserializeFrom(ByteReader& in, absl::string_view what);
  // The same for a part of the sums written in parts (a sharded state): the words only,
  // whose count the caller writes (and checks) once for all the parts.
  void PutWords(ByteWriter& out) const { out.PutElements(state_.data(), state_.size()); }
  absl::Status GetWords(ByteReader& in) { return in.GetElements(state_.data(), state_.size()); }
  uint64_t MemoryBytes() const { return state_.capacity() * sizeof(uint64_t); }

 private:
  uint64_t* sum(int64_t i) { return state_.data() + i * words_; }
  const uint64_t* sum(int64_t i) const { return state_.data() + i * words_; }

  Grid grid_;
  int words_;
  int lowest_exponent_;  // the value of the sum's bit 0 is 2^lowest_exponent_
  std::vector<uint64_t> state_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_EXACT_SUMS_H_
