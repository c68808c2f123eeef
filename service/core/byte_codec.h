// Little-endian byte writer and bounds-checked reader for fedagg's binary formats
// (the partial-aggregate format in docs/PARTIAL_AGGREGATE_FORMAT.md). The reader never
// reads past its input: every read reports DATA_LOSS on truncated or oversized input.
#ifndef FEDAGG_SERVICE_CORE_BYTE_CODEC_H_
#define FEDAGG_SERVICE_CORE_BYTE_CODEC_H_

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include "absl/strings/string_view.h"
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
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

class ByteReader {
 public:
  explicit ByteReader(absl::string_view in) : in_(in) {}

  template <typename T>
  absl::Status Get(T* value) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (in_.size() - pos_ < sizeof(T)) return Truncated(sizeof(T));
    std::memcpy(value, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return absl::OkStatus();
  }
  // Reads a count written by PutArray and checks it equals `expected`.
  template <typename T>
  absl::Status GetArrayExact(T* data, uint64_t expected, absl::string_view what) {
    uint64_t count = 0;
    if (absl::Status s = Get(&count); !s.ok()) return s;
    if (count != expected) {
      return absl::DataLossError(absl::StrCat("partial aggregate: ", what, " has ", count,
                                              " elements, expected ", expected));
    }
    return GetRaw(data, count * sizeof(T));
  }
  // Reads an array of any length that fits in the remaining input.
  template <typename T>
  absl::Status GetArray(std::vector<T>* data) {
    uint64_t count = 0;
    if (absl::Status s = Get(&count); !s.ok()) return s;
    if (count > (in_.size() - pos_) / sizeof(T)) return Truncated(count * sizeof(T));
    data->resize(count);
    return GetRaw(data->data(), count * sizeof(T));
  }
  absl::Status GetString(std::string* s) {
    std::vector<char> chars;
    if (absl::Status status = GetArray(&chars); !status.ok()) return status;
    s->assign(chars.begin(), chars.end());
    return absl::OkStatus();
  }
  bool AtEnd() const { return pos_ == in_.size(); }
  size_t position() const { return pos_; }

 private:
  absl::Status GetRaw(void* data, uint64_t n) {
    if (in_.size() - pos_ < n) return Truncated(n);
    if (n > 0) std::memcpy(data, in_.data() + pos_, n);
    pos_ += n;
    return absl::OkStatus();
  }
  absl::Status Truncated(uint64_t wanted) const {
    return absl::DataLossError(absl::StrCat("partial aggregate truncated: needed ", wanted,
                                            " bytes at offset ", pos_, ", ",
                                            in_.size() - pos_, " left"));
  }
  absl::string_view in_;
  size_t pos_ = 0;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_BYTE_CODEC_H_
