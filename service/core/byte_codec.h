// Little-endian byte writer and bounds-checked reader for fedagg's binary formats
// (the partial-aggregate format in docs/PARTIAL_AGGREGATE_FORMAT.md). The reader never
// reads past its input: every read reports DATA_LOSS on truncated or oversized input. It
// reads a string in memory, or a stream's chunks as they arrive (ByteSource).
#ifndef FEDAGG_SERVICE_CORE_BYTE_CODEC_H_
#define FEDAGG_SERVICE_CORE_BYTE_CODEC_H_

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include "absl/strings/string_view.h"
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace fedagg {

static_assert(std::endian::native == std::endian::little,
              "fedagg's binary formats are little-endian and written with memcpy");

class ByteWriter {
 public:
  template <typename T>
  void Put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    Append(&value, sizeof(T));
  }
  // Writes a u64 element count followed by the elements.
  template <typename T>
  void PutArray(const T* data, size_t count) {
    Put<uint64_t>(count);
    PutElements(data, count);
  }
  // Writes elements only: an array written in parts is its u64 total count, then each part.
  template <typename T>
  void PutElements(const T* data, size_t count) {
    static_assert(std::is_trivially_copyable_v<T>);
    Append(data, count * sizeof(T));
  }
  void PutString(absl::string_view s) { PutArray(s.data(), s.size()); }

  std::string Take() { return std::move(out_); }

 private:
  void Append(const void* data, size_t n) {
    out_.append(static_cast<const char*>(data), n);
  }
  std::string out_;
};

// A reader's input handed over piece by piece, as the chunks of a stream arrive.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // The next piece of input, valid until the following call; it may block until the piece
  // has arrived. Not OK when the input ended early or could not be received: that status
  // is what the read in progress reports.
  virtual absl::StatusOr<absl::string_view> Next() = 0;
};

class ByteReader {
 public:
  // Reads `in`, which stays valid while the reader is used.
  explicit ByteReader(absl::string_view in) : piece_(in), total_(in.size()) {}
  // Reads `total` bytes that `source` hands over piece by piece: the reader holds no copy
  // of its input, so a large input can be decoded while it is still arriving.
  ByteReader(ByteSource& source, uint64_t total) : source_(&source), total_(total) {}

  template <typename T>
  absl::Status Get(T* value) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (piece_.size() - pos_ >= sizeof(T)) {
      std::memcpy(value, piece_.data() + pos_, sizeof(T));
      pos_ += sizeof(T);
      return absl::OkStatus();
    }
    return GetRaw(value, sizeof(T));
  }
  // Reads `count` elements written by PutElements (no count of their own).
  template <typename T>
  absl::Status GetElements(T* data, uint64_t count) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (absl::Status s = CheckRemaining(count, sizeof(T)); !s.ok()) return s;
    return GetRaw(data, count * sizeof(T));
  }
  // Reads the count written by PutArray and checks it equals `expected`; the elements are
  // then read with GetElements, in one call or in parts.
  absl::Status GetCountExact(uint64_t expected, absl::string_view what) {
    uint64_t count = 0;
    if (absl::Status s = Get(&count); !s.ok()) return s;
    if (count != expected) {
      return absl::DataLossError(absl::StrCat("partial aggregate: ", what, " has ", count,
                                              " elements, expected ", expected));
    }
    return absl::OkStatus();
  }
  // Reads an array written by PutArray whose count must be `expected`.
  template <typename T>
  absl::Status GetArrayExact(T* data, uint64_t expected, absl::string_view what) {
    if (absl::Status s = GetCountExact(expected, what); !s.ok()) return s;
    return GetElements(data, expected);
  }
  // Reads an array of any length that fits in the remaining input.
  template <typename T>
  absl::Status GetArray(std::vector<T>* data) {
    uint64_t count = 0;
    if (absl::Status s = Get(&count); !s.ok()) return s;
    if (absl::Status s = CheckRemaining(count, sizeof(T)); !s.ok()) return s;
    data->resize(count);
    return GetRaw(data->data(), count * sizeof(T));
  }
  // DATA_LOSS unless `count` elements of `element_bytes` each fit in the remaining input:
  // checked before allocating room for a count read from the input.
  absl::Status CheckRemaining(uint64_t count, size_t element_bytes) const {
    if (count > remaining() / element_bytes) return Truncated(count * element_bytes);
    return absl::OkStatus();
  }
  absl::Status GetString(std::string* s) {
    std::vector<char> chars;
    if (absl::Status status = GetArray(&chars); !status.ok()) return status;
    s->assign(chars.begin(), chars.end());
    return absl::OkStatus();
  }
  bool AtEnd() const { return remaining() == 0; }
  uint64_t position() const { return before_piece_ + pos_; }
  uint64_t remaining() const { return total_ - position(); }

 private:
  // Copies `n` bytes, taking pieces from the source as the current one runs out.
  absl::Status GetRaw(void* data, uint64_t n) {
    if (remaining() < n) return Truncated(n);
    char* out = static_cast<char*>(data);
    while (n > 0) {
      if (pos_ == piece_.size()) {
        absl::StatusOr<absl::string_view> next = source_->Next();
        if (!next.ok()) return next.status();
        before_piece_ += piece_.size();
        piece_ = *next;
        pos_ = 0;
        if (piece_.size() > total_ - before_piece_) {
          return absl::DataLossError(absl::StrCat("partial aggregate: its input runs past the ", total_,
                                                  " bytes declared"));
        }
        continue;
      }
      const size_t take = static_cast<size_t>(std::min<uint64_t>(n, piece_.size() - pos_));
      std::memcpy(out, piece_.data() + pos_, take);
      out += take;
      pos_ += take;
      n -= take;
    }
    return absl::OkStatus();
  }
  absl::Status Truncated(uint64_t wanted) const {
    return absl::DataLossError(absl::StrCat("partial aggregate truncated: needed ", wanted,
                                            " bytes at offset ", position(), ", ", remaining(), " left"));
  }
  ByteSource* source_ = nullptr;  // null: the whole input is piece_
  absl::string_view piece_;       // the piece being read
  size_t pos_ = 0;                // within piece_
  uint64_t before_piece_ = 0;     // bytes in the pieces before piece_
  uint64_t total_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_BYTE_CODEC_H_
