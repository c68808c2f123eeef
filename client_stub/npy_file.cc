// NumPy .npy reading and writing.
#include "client_stub/npy_file.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "service/core/read_file.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace fedagg {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

absl::StatusOr<DType> DTypeFromDescr(const std::string& descr, const std::string& path) {
  if (descr == "<f4") return DType::kFloat32;
  if (descr == "<f8") return DType::kFloat64;
  if (descr == "<i4") return DType::kInt32;
  if (descr == "<i8") return DType::kInt64;
  if (descr == "<f2") return DType::kFloat16;
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": dtype '", descr, "' is not supported; use float16, float32, float64, int32 or int64 "
      "(little-endian)"));
}

const char* DescrOf(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "<f4";
    case DType::kFloat64: return "<f8";
    case DType::kInt32: return "<i4";
    case DType::kInt64: return "<i8";
    case DType::kFloat16: return "<f2";
    case DType::kBFloat16: return nullptr;
  }
  return nullptr;
}

// The value of 'key' in the header dict: a quoted string, a word, or a parenthesised tuple.
std::string HeaderValue(const std::string& header, const std::string& key) {
  const size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) return "";
  size_t start = header.find(':', at);
  if (start == std::string::npos) return "";
  ++start;
  while (start < header.size() && header[start] == ' ') ++start;
  if (start >= header.size()) return "";
  if (header[start] == '(') return header.substr(start + 1, header.find(')', start) - start - 1);
  if (header[start] == '\'') return header.substr(start + 1, header.find('\'', start + 1) - start - 1);
  return header.substr(start, header.find_first_of(",}", start) - start);
}

}  // namespace

absl::StatusOr<Tensor> ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read '", path, "'"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return ParseNpy(buffer.str(), path);
}

absl::StatusOr<Tensor> ParseNpy(absl::string_view bytes, const std::string& path) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != absl::string_view(kMagic, 6)) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a .npy file"));
  }
  const uint8_t major = static_cast<uint8_t>(bytes[6]);
  size_t header_length = 0, header_start = 0;
  if (major == 1) {
    header_length = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
    header_start = 10;
  } else if (major == 2 && bytes.size() >= 12) {
    uint32_t length = 0;
    std::memcpy(&length, bytes.data() + 8, 4);
    header_length = length;
    header_start = 12;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(path, ": .npy version ", major, " is not supported"));
  }
  if (header_start + header_length > bytes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": truncated .npy header"));
  }
  const std::string header(bytes.substr(header_start, header_length));
  Tensor tensor;
  absl::StatusOr<DType> dtype = DTypeFromDescr(HeaderValue(header, "descr"), path);
  if (!dtype.ok()) return dtype.status();
  tensor.dtype = *dtype;
  if (HeaderValue(header, "fortran_order") != "False") {
    return absl::InvalidArgumentError(absl::StrCat(path, ": Fortran-order arrays are not supported; "
                                                   "save a C-order array (np.ascontiguousarray)"));
  }
  int64_t elements = 1;
  for (absl::string_view dim : absl::StrSplit(HeaderValue(header, "shape"), ',', absl::SkipWhitespace())) {
    int64_t value = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(dim), &value) || value < 0) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": bad shape in .npy header"));
    }
    tensor.shape.push_back(value);
    elements *= value;
  }
  const size_t data_start = header_start + header_length;
  const size_t expected = static_cast<size_t>(elements) * DTypeSize(tensor.dtype);
  if (bytes.size() - data_start != expected) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": expected ", expected, " data bytes, found ",
                                                   bytes.size() - data_start));
  }
  tensor.bytes.resize(expected);
  if (expected > 0) std::memcpy(tensor.bytes.data(), bytes.data() + data_start, expected);
  return tensor;
}

absl::StatusOr<std::string> EncodeNpy(DType dtype, const std::vector<int64_t>& shape, const void* data,
                                      size_t bytes) {
  const char* descr = DescrOf(dtype);
  if (descr == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cannot write ", DTypeName(dtype), " to .npy"));
  }
  std::string dims = absl::StrJoin(shape, ", ");
  if (shape.size() == 1) dims += ",";
  std::string header = absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': (", dims, "), }");
  // Pad so that the data starts on a 64-byte boundary; the header ends with a newline.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string encoded(kMagic, 6);
  encoded += static_cast<char>(1);
  encoded += static_cast<char>(0);
  encoded += static_cast<char>(header.size() & 0xff);
  encoded += static_cast<char>(header.size() >> 8);
  encoded += header;
  encoded.append(static_cast<const char*>(data), bytes);
  return encoded;
}

absl::Status WriteNpy(const std::string& path, DType dtype, const std::vector<int64_t>& shape,
                      const void* data, size_t bytes) {
  absl::StatusOr<std::string> encoded = EncodeNpy(dtype, shape, data, bytes);
  if (!encoded.ok()) return encoded.status();
  return WriteFile(path, *encoded);
}

}  // namespace fedagg
