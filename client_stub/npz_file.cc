// NumPy .npz reading and writing: the zip container (stored members only; archives over
// 4 GiB, which need zip64 offsets, are refused).
#include "client_stub/npz_file.h"

#include <array>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "service/core/read_file.h"
#include "client_stub/npy_file.h"

namespace fedagg {
namespace {

constexpr uint32_t kLocalHeader = 0x04034b50, kCentralHeader = 0x02014b50, kEndOfCentral = 0x06054b50;
constexpr uint32_t kZip64Marker = 0xffffffff;

// CRC-32 (IEEE 802.3, as zip uses).
uint32_t Crc32(absl::string_view bytes) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = 0xffffffffu;
  for (char byte : bytes) crc = table[(crc ^ static_cast<uint8_t>(byte)) & 0xff] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

uint64_t Little(absl::string_view bytes, size_t at, int width) {
  uint64_t value = 0;
  for (int i = width - 1; i >= 0; --i) value = (value << 8) | static_cast<uint8_t>(bytes[at + i]);
  return value;
}

void PutLittle(std::string& out, uint64_t value, int width) {
  for (int i = 0; i < width; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

// A central-directory size or offset that does not fit 32 bits sits in the zip64 extra
// field (id 1), in the order usize, csize, offset, for those marked 0xffffffff.
void ApplyZip64Extra(absl::string_view extra, uint64_t& usize, uint64_t& csize, uint64_t& offset) {
  for (size_t at = 0; at + 4 <= extra.size();) {
    const uint64_t id = Little(extra, at, 2), length = Little(extra, at + 2, 2);
    if (at + 4 + length > extra.size()) return;
    if (id == 1) {
      size_t field = at + 4;
      for (uint64_t* value : {&usize, &csize, &offset}) {
        if (*value != kZip64Marker) continue;
        if (field + 8 > at + 4 + length) return;
        *value = Little(extra, field, 8);
        field += 8;
      }
      return;
    }
    at += 4 + length;
  }
}

}  // namespace

absl::StatusOr<std::map<std::string, Tensor>> ReadNpz(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read '", path, "'"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string file = buffer.str();
  const absl::string_view bytes(file);
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a .npz file numpy.savez writes: ", why));
  };
  // The end-of-central-directory record: 22 bytes plus a comment of up to 65535.
  size_t end = std::string::npos;
  for (size_t at = bytes.size() >= 22 ? bytes.size() - 22 : std::string::npos;
       at != std::string::npos && bytes.size() - at <= 22 + 65535; --at) {
    if (Little(bytes, at, 4) == kEndOfCentral) {
      end = at;
      break;
    }
    if (at == 0) break;
  }
  if (end == std::string::npos) return bad("no zip end record");
  const uint64_t entries = Little(bytes, end + 10, 2);
  uint64_t at = Little(bytes, end + 16, 4);
  if (entries == 0xffff || at == kZip64Marker) return bad("zip64 archives (over 4 GiB) are not supported");
  std::map<std::string, Tensor> members;
  for (uint64_t e = 0; e < entries; ++e) {
    if (at + 46 > bytes.size() || Little(bytes, at, 4) != kCentralHeader) return bad("bad central directory");
    const uint64_t flags = Little(bytes, at + 8, 2), method = Little(bytes, at + 10, 2);
    const uint64_t crc = Little(bytes, at + 16, 4);
    uint64_t csize = Little(bytes, at + 20, 4), usize = Little(bytes, at + 24, 4);
    const uint64_t name_length = Little(bytes, at + 28, 2), extra_length = Little(bytes, at + 30, 2);
    const uint64_t comment_length = Little(bytes, at + 32, 2);
    uint64_t offset = Little(bytes, at + 42, 4);
    if (at + 46 + name_length + extra_length > bytes.size()) return bad("bad central directory");
    const std::string name(bytes.substr(at + 46, name_length));
    ApplyZip64Extra(bytes.substr(at + 46 + name_length, extra_length), usize, csize, offset);
    at += 46 + name_length + extra_length + comment_length;
    if (flags & 1) return bad(absl::StrCat("member '", name, "' is encrypted"));
    if (method != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": member '", name, "' is compressed (zip method ", method,
          "); fedagg-client reads uncompressed .npz files: save with numpy.savez, not numpy.savez_compressed"));
    }
    if (csize != usize) return bad(absl::StrCat("member '", name, "' has different stored and plain sizes"));
    if (offset + 30 > bytes.size() || Little(bytes, offset, 4) != kLocalHeader) {
      return bad(absl::StrCat("member '", name, "' has no local header"));
    }
    const uint64_t data = offset + 30 + Little(bytes, offset + 26, 2) + Little(bytes, offset + 28, 2);
    if (data > bytes.size() || bytes.size() - data < csize) return bad(absl::StrCat("member '", name, "' is truncated"));
    const absl::string_view content = bytes.substr(data, csize);
    if (Crc32(content) != crc) return bad(absl::StrCat("member '", name, "' fails its CRC-32 check"));
    if (!absl::EndsWith(name, ".npy")) return bad(absl::StrCat("member '", name, "' is not a .npy"));
    const std::string key = name.substr(0, name.size() - 4);
    absl::StatusOr<Tensor> tensor = ParseNpy(content, absl::StrCat(path, ":", name));
    if (!tensor.ok()) return tensor.status();
    members[key] = *std::move(tensor);
  }
  return members;
}

absl::Status WriteNpz(const std::string& path, const std::vector<std::pair<std::string, std::string>>& members) {
  std::string archive, central;
  for (const auto& [key, npy] : members) {
    const std::string name = key + ".npy";
    if (archive.size() + npy.size() + name.size() + 30 >= kZip64Marker || members.size() >= 0xffff) {
      return absl::InvalidArgumentError(absl::StrCat("cannot write '", path, "': over 4 GiB (or 65535 members) "
                                                     "needs zip64, which fedagg-client does not write; use --out=DIRECTORY"));
    }
    const uint32_t crc = Crc32(npy);
    const uint64_t offset = archive.size();
    // Fields shared by the local and the central header, from "version needed" on.
    std::string common;
    PutLittle(common, 20, 2);  // version needed: 2.0
    PutLittle(common, 0, 2);   // flags
    PutLittle(common, 0, 2);   // method: stored
    PutLittle(common, 0, 2);   // time
    PutLittle(common, (1980 - 1980) << 9 | 1 << 5 | 1, 2);  // date: 1980-01-01
    PutLittle(common, crc, 4);
    PutLittle(common, npy.size(), 4);
    PutLittle(common, npy.size(), 4);
    PutLittle(common, name.size(), 2);
    PutLittle(common, 0, 2);  // extra length
    PutLittle(archive, kLocalHeader, 4);
    archive += common + name + npy;
    PutLittle(central, kCentralHeader, 4);
    PutLittle(central, 20, 2);  // version made by
    central += common;
    PutLittle(central, 0, 2);  // comment length
    PutLittle(central, 0, 2);  // disk
    PutLittle(central, 0, 2);  // internal attributes
    PutLittle(central, 0, 4);  // external attributes
    PutLittle(central, offset, 4);
    central += name;
  }
  const uint64_t central_offset = archive.size();
  archive += central;
  PutLittle(archive, kEndOfCentral, 4);
  PutLittle(archive, 0, 2);
  PutLittle(archive, 0, 2);
  PutLittle(archive, members.size(), 2);
  PutLittle(archive, members.size(), 2);
  PutLittle(archive, central.size(), 4);
  PutLittle(archive, central_offset, 4);
  PutLittle(archive, 0, 2);
  return WriteFile(path, archive);
}

}  // namespace fedagg
