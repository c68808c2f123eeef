// ValueEncoding: sizes, names and range checks of the wire encodings of values.
#include "service/core/value_encoding.h"

#include <charconv>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace fedagg {

ValueEncoding ValueEncoding::Quantized(int bits, int64_t block_size, int64_t rotation, uint64_t rotation_seed) {
  return ValueEncoding{ValueCoding::kQuantized, bits, block_size, 0, rotation, rotation_seed};
}

ValueEncoding ValueEncoding::Discretized(int bits, double scale) {
  return ValueEncoding{ValueCoding::kDiscretized, bits, 0, scale};
}

int64_t ValueEncoding::Blocks(int64_t elements) const {
  if (!quantized() || block_size <= 0) return 0;
  return (elements + block_size - 1) / block_size;
}

uint64_t ValueEncoding::EncodedBytes(int64_t elements) const {
  const uint64_t n = static_cast<uint64_t>(elements);
  const uint64_t codes = (n * static_cast<uint64_t>(bits) + 7) / 8;
  if (quantized()) return static_cast<uint64_t>(Blocks(elements)) * sizeof(float) + codes;
  return codes;
}

std::string ValueEncoding::ToString() const {
  switch (coding) {
    case ValueCoding::kPlain: return "plain";
    case ValueCoding::kQuantized:
      return absl::StrCat("quantized:", bits, block_size == kDefaultBlockSize ? "" : absl::StrCat("/", block_size),
                          rotation > 0 ? absl::StrCat("+rotation:", rotation) : "");
    case ValueCoding::kDiscretized: {
      char digits[32];  // the shortest spelling that reads back as the same double
      const auto end = std::to_chars(digits, digits + sizeof(digits), scale).ptr;
      return absl::StrCat("discretized:", bits, "@", absl::string_view(digits, end - digits));
    }
  }
  return "unknown";
}

absl::Status ValueEncoding::Check() const {
  switch (coding) {
    case ValueCoding::kPlain: return absl::OkStatus();
    case ValueCoding::kQuantized:
      if (bits != 1 && bits != 2 && bits != 4 && bits != 8) {
        return absl::InvalidArgumentError(
            absl::StrCat("a quantized encoding takes 1, 2, 4 or 8 bits a coordinate, not ", bits));
      }
      if (block_size < 8 || block_size > kMaxBlockSize || block_size % 8 != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "a quantized encoding's block size must be a multiple of 8 in [8, ", kMaxBlockSize,
            "] (default ", kDefaultBlockSize, "), not ", block_size));
      }
      if (rotation != 0 && (rotation < kMinRotation || rotation > kMaxRotation || (rotation & (rotation - 1)) != 0)) {
        return absl::InvalidArgumentError(absl::StrCat("a quantized encoding's rotation must be a power of two in [",
                                                       kMinRotation, ", ", kMaxRotation, "] (0: none), not ",
                                                       rotation));
      }
      return absl::OkStatus();
    case ValueCoding::kDiscretized:
      if (rotation != 0) return absl::InvalidArgumentError("only a quantized encoding is rotated");
      if (bits != 8 && bits != 16 && bits != 32) {
        return absl::InvalidArgumentError(
            absl::StrCat("a discretized encoding takes 8, 16 or 32 bits a coordinate, not ", bits));
      }
      if (!std::isfinite(scale) || scale <= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "a discretized encoding's scale (the value of one integer step) must be finite and > 0, not ",
            scale));
      }
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError("unknown value encoding");
}

absl::StatusOr<ValueEncoding> ParseValueEncoding(absl::string_view text) {
  const std::string original(text);
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "encoding '", original, "' ", why,
        "; write plain, quantized:BITS[/BLOCK][+rotation:SIZE] (BITS 1, 2, 4 or 8) or "
        "discretized:BITS@SCALE (BITS 8, 16 or 32)"));
  };
  ValueEncoding encoding;
  if (text == "plain" || text == "none") return encoding;
  if (absl::ConsumePrefix(&text, "quantized:")) {
    encoding.coding = ValueCoding::kQuantized;
    encoding.block_size = ValueEncoding::kDefaultBlockSize;
    if (const size_t plus = text.find("+rotation:"); plus != absl::string_view::npos) {
      if (!absl::SimpleAtoi(text.substr(plus + 10), &encoding.rotation)) return bad("has no valid rotation size");
      text = text.substr(0, plus);
    }
    const size_t slash = text.find('/');
    if (slash != absl::string_view::npos) {
      if (!absl::SimpleAtoi(text.substr(slash + 1), &encoding.block_size)) return bad("has no valid block size");
      text = text.substr(0, slash);
    }
    if (!absl::SimpleAtoi(text, &encoding.bits)) return bad("has no valid bit count");
  } else if (absl::ConsumePrefix(&text, "discretized:")) {
    encoding.coding = ValueCoding::kDiscretized;
    const size_t at = text.find('@');
    if (at == absl::string_view::npos) return bad("has no @SCALE");
    if (!absl::SimpleAtoi(text.substr(0, at), &encoding.bits)) return bad("has no valid bit count");
    if (!absl::SimpleAtod(text.substr(at + 1), &encoding.scale)) return bad("has no valid scale");
  } else {
    return bad("is not an encoding");
  }
  if (absl::Status status = encoding.Check(); !status.ok()) return status;
  return encoding;
}

}  // namespace fedagg
