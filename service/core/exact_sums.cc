// Exact fixed-point sums (exact_sums.h): adding, merging and rounding multiword
// two's-complement numbers.
#include "service/core/exact_sums.h"

#include <bit>
#include <cmath>

namespace fedagg {
namespace {

constexpr int kMaxWords = 34;

struct GridShape {
  int words;
  int lowest_exponent;
};

constexpr GridShape ShapeOf(ExactSums::Grid grid) {
  // float32: bits 2^-149 .. 2^234 (values below 2^170, 2^63 times, and a sign);
  // float64: bits 2^-1074 .. 2^1101 (values below 2^1024, 2^63 times, and a sign).
  return grid == ExactSums::Grid::kFloat32 ? GridShape{6, -149} : GridShape{kMaxWords, -1074};
}

// A finite, non-zero double as magnitude * 2^exponent, with magnitude < 2^53.
struct Decomposed {
  bool negative;
  uint64_t magnitude;
  int exponent;
};

Decomposed Decompose(double value) {
  const uint64_t bits = std::bit_cast<uint64_t>(value);
  const int biased = static_cast<int>((bits >> 52) & 0x7FF);
  uint64_t magnitude = bits & ((uint64_t{1} << 52) - 1);
  int exponent = -1074;  // subnormal
  if (biased != 0) {
    magnitude |= uint64_t{1} << 52;
    exponent = biased - 1075;
  }
  return Decomposed{(bits >> 63) != 0, magnitude, exponent};
}

// `magnitude` divided by 2^shift (shift > 0), to nearest, ties to even.
uint64_t ShiftRightRounded(uint64_t magnitude, int shift) {
  if (shift > 53) return 0;  // below half a step (magnitude < 2^53)
  const uint64_t quotient = magnitude >> shift;
  const uint64_t remainder = magnitude & ((uint64_t{1} << shift) - 1);
  const uint64_t half = uint64_t{1} << (shift - 1);
  return quotient + ((remainder > half || (remainder == half && (quotient & 1) != 0)) ? 1 : 0);
}

// The 64 bits of `magnitude` whose lowest is bit `position` (which may be negative: the
// bits below bit 0 are 0), and whether any bit below them is set.
uint64_t BitsFrom(const uint64_t* magnitude, int words, int position, bool* sticky) {
  if (position < 0) {
    *sticky = false;
    return magnitude[0] << -position;
  }
  const int word = position >> 6, bit = position & 63;
  uint64_t bits = magnitude[word] >> bit;
  if (bit != 0 && word + 1 < words) bits |= magnitude[word + 1] << (64 - bit);
  bool below = bit != 0 && (magnitude[word] & ((uint64_t{1} << bit) - 1)) != 0;
  for (int w = 0; w < word && !below; ++w) below = magnitude[w] != 0;
  *sticky = below;
  return bits;
}

}  // namespace

int ExactSums::WordsOf(Grid grid) { return ShapeOf(grid).words; }

ExactSums::ExactSums(Grid grid, int64_t size)
    : grid_(grid),
      words_(ShapeOf(grid).words),
      lowest_exponent_(ShapeOf(grid).lowest_exponent),
      state_(static_cast<size_t>(size) * static_cast<size_t>(words_), 0) {}

void ExactSums::Resize(int64_t size) { state_.resize(static_cast<size_t>(size) * static_cast<size_t>(words_), 0); }

void ExactSums::Add(int64_t i, double value) {
  if (value == 0) return;
  Decomposed d = Decompose(value);
  int shift = d.exponent - lowest_exponent_;
  if (shift < 0) {  // finer than the grid: rounded to it
    d.magnitude = ShiftRightRounded(d.magnitude, -shift);
    if (d.magnitude == 0) return;
    shift = 0;
  }
  // The magnitude (< 2^54 after rounding) spans words `word` and `word + 1`, both inside
  // the sum for values in the grid's range.
  const int word = shift >> 6, bit = shift & 63;
  const uint64_t low = d.magnitude << bit;
  const uint64_t high = bit == 0 ? 0 : d.magnitude >> (64 - bit);
  uint64_t* s = sum(i);
  if (!d.negative) {
    uint64_t carry = __builtin_add_overflow(s[word], low, &s[word]) ? 1 : 0;
    carry = __builtin_add_overflow(s[word + 1], high + carry, &s[word + 1]) ? 1 : 0;
    for (int w = word + 2; carry != 0 && w < words_; ++w) carry = ++s[w] == 0 ? 1 : 0;
  } else {
    uint64_t borrow = __builtin_sub_overflow(s[word], low, &s[word]) ? 1 : 0;
    borrow = __builtin_sub_overflow(s[word + 1], high + borrow, &s[word + 1]) ? 1 : 0;
    for (int w = word + 2; borrow != 0 && w < words_; ++w) borrow = s[w]-- == 0 ? 1 : 0;
  }
}

void ExactSums::AddSum(int64_t i, const ExactSums& other, int64_t j) {
  uint64_t* s = sum(i);
  const uint64_t* o = other.sum(j);
  uint64_t carry = 0;
  for (int w = 0; w < words_; ++w) {
    const bool first = __builtin_add_overflow(s[w], o[w], &s[w]);
    const bool second = __builtin_add_overflow(s[w], carry, &s[w]);
    carry = (first || second) ? 1 : 0;
  }
}

double ExactSums::Rounded(int64_t i) const {
  const uint64_t* s = sum(i);
  const bool negative = (s[words_ - 1] >> 63) != 0;
  uint64_t magnitude[kMaxWords];
  uint64_t carry = negative ? 1 : 0;  // two's complement: invert, add 1
  for (int w = 0; w < words_; ++w) {
    const uint64_t word = negative ? ~s[w] : s[w];
    magnitude[w] = word + carry;
    carry = (carry != 0 && magnitude[w] == 0) ? 1 : 0;
  }
  int top = words_ - 1;
  while (top >= 0 && magnitude[top] == 0) --top;
  if (top < 0) return 0.0;
  const int highest_bit = top * 64 + 63 - std::countl_zero(magnitude[top]);
  double value;
  if (highest_bit < 53) {  // fits a double's significand: exact
    value = std::ldexp(static_cast<double>(magnitude[0]), lowest_exponent_);
  } else {
    const int position = highest_bit - 63;  // the lowest of the 64 leading bits
    bool sticky = false;
    const uint64_t leading = BitsFrom(magnitude, words_, position, &sticky);
    uint64_t significand = leading >> 11;  // 53 bits
    const uint64_t rest = leading & 0x7FF, half = 0x400;
    if (rest > half || (rest == half && (sticky || (significand & 1) != 0))) ++significand;
    value = std::ldexp(static_cast<double>(significand), position + 11 + lowest_exponent_);
  }
  return negative ? -value : value;
}

void ExactSums::SerializeTo(ByteWriter& out) const { out.PutArray(state_.data(), state_.size()); }

absl::Status ExactSums::DeserializeFrom(ByteReader& in, absl::string_view what) {
  return in.GetArrayExact(state_.data(), state_.size(), what);
}

}  // namespace fedagg
