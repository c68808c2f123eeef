// The checkpoint file: encoding, checksum, atomic write and read.
//
// Body (after the 24-byte header), every string and array as a u64 count then bytes:
//   spec (serialized v1.AggregationSpec), i32 state, detail, i64 contributions,
//   f64 weight sum, u64 n + n client ids, u64 m + m x (child id, u64 last sequence,
//   u8 final received, [version 2:] u8 released, u64 k + k leased client ids), partial
//   aggregate (docs/PARTIAL_AGGREGATE_FORMAT.md), [version 3:] the noise key (0 or 32
//   bytes: a differentially private aggregation FINALIZED with that key's noise),
//   [version 4:] the secure aggregation's root private key (0 or 32 bytes).
#include "service/rounds/checkpoint_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "service/core/byte_codec.h"
#include "service/core/crc32c.h"
#include "service/core/read_file.h"
#include "service/core/status_macros.h"

namespace fedagg {
namespace {

constexpr char kMagic[8] = {'F', 'E', 'D', 'A', 'G', 'G', 'C', 'K'};

// A file descriptor closed when it goes out of scope.
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closes now, reporting the error a deferred write may surface only here.
  int Close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  const int error = errno;
  return absl::UnavailableError(absl::StrCat("checkpoint: ", what, " '", path, "' failed: ",
                                             std::strerror(error)));
}

absl::Status WriteAll(int fd, absl::string_view bytes, const std::string& path) {
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("write to", path);
    }
    written += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status Corrupt(absl::string_view why) {
  return absl::DataLossError(absl::StrCat("checkpoint file is torn or corrupt: ", why));
}

// An optional 32-byte key: a string of 0 or 32 bytes.
void PutKey(ByteWriter& out, const std::optional<std::array<uint8_t, 32>>& key) {
  out.PutString(key.has_value() ? absl::string_view(reinterpret_cast<const char*>(key->data()), key->size())
                                : absl::string_view());
}

absl::Status GetKey(ByteReader& in, absl::string_view what, std::optional<std::array<uint8_t, 32>>* key) {
  std::string bytes;
  FEDAGG_RETURN_IF_ERROR(in.GetString(&bytes));
  if (bytes.empty()) return absl::OkStatus();
  std::array<uint8_t, 32> read{};
  if (bytes.size() != read.size()) return Corrupt(absl::StrCat(what, " of ", bytes.size(), " bytes"));
  std::memcpy(read.data(), bytes.data(), read.size());
  *key = read;
  return absl::OkStatus();
}

// A list of client ids: u64 count, then each id.
void PutClientIds(ByteWriter& out, const std::vector<std::string>& client_ids) {
  out.Put<uint64_t>(client_ids.size());
  for (const std::string& client_id : client_ids) out.PutString(client_id);
}

void PutClientIds(ByteWriter& out, const ClientIdList& client_ids) {
  out.Put<uint64_t>(client_ids.size());
  client_ids.ForEach([&](absl::string_view client_id) { out.PutString(client_id); });
}

// Reads a list of client ids, handing each to `add`.
absl::Status GetClientIds(ByteReader& in, absl::FunctionRef<absl::Status(std::string)> add) {
  uint64_t count = 0;
  FEDAGG_RETURN_IF_ERROR(in.Get(&count));
  for (uint64_t i = 0; i < count; ++i) {
    std::string client_id;
    FEDAGG_RETURN_IF_ERROR(in.GetString(&client_id));
    FEDAGG_RETURN_IF_ERROR(add(std::move(client_id)));
  }
  return absl::OkStatus();
}

absl::Status GetClientIds(ByteReader& in, std::vector<std::string>* client_ids) {
  return GetClientIds(in, [&](std::string client_id) {
    client_ids->push_back(std::move(client_id));
    return absl::OkStatus();
  });
}

// The counted ids: a set, so an id listed twice is corruption (no encoder writes one).
absl::Status GetClientIds(ByteReader& in, ClientIdList* client_ids) {
  ClientIdSet counted;
  FEDAGG_RETURN_IF_ERROR(GetClientIds(in, [&](std::string client_id) {
    return counted.insert(client_id) ? absl::OkStatus()
                                     : Corrupt(absl::StrCat("client id '", client_id, "' is counted twice"));
  }));
  *client_ids = counted.Snapshot();
  return absl::OkStatus();
}

}  // namespace

std::string CheckpointFileName(const std::string& aggregation_id) {
  return absl::StrCat(aggregation_id, kCheckpointSuffix);
}

std::string EncodeCheckpoint(const AggregationCheckpoint& checkpoint) {
  ByteWriter out;
  // Header placeholder: magic, version, CRC and body length are filled in below.
  uint64_t magic = 0;
  std::memcpy(&magic, kMagic, sizeof(magic));
  out.Put<uint64_t>(magic);
  out.Put<uint32_t>(kCheckpointFormatVersion);
  out.Put<uint32_t>(0);
  out.Put<uint64_t>(0);
  out.PutString(checkpoint.spec.SerializeAsString());
  out.Put<int32_t>(static_cast<int32_t>(checkpoint.state));
  out.PutString(checkpoint.detail);
  out.Put<int64_t>(checkpoint.contributions);
  out.Put<double>(checkpoint.weight_sum);
  PutClientIds(out, checkpoint.counted);
  out.Put<uint64_t>(checkpoint.children.size());
  for (const AggregationCheckpoint::ChildProgress& child : checkpoint.children) {
    out.PutString(child.child_id);
    out.Put<uint64_t>(child.last_sequence);
    out.Put<uint8_t>(child.final_received ? 1 : 0);
    out.Put<uint8_t>(child.released ? 1 : 0);
    PutClientIds(out, child.leased);
  }
  out.PutString(checkpoint.partial);
  PutKey(out, checkpoint.noise_key.has_value() ? std::optional(checkpoint.noise_key->bytes) : std::nullopt);
  PutKey(out, checkpoint.secure_root_key);
  std::string bytes = out.Take();
  const uint64_t body_length = bytes.size() - kCheckpointHeaderBytes;
  const uint32_t crc = Crc32cExtend(0, bytes.data() + kCheckpointHeaderBytes, body_length);
  std::memcpy(bytes.data() + 12, &crc, sizeof(crc));
  std::memcpy(bytes.data() + 16, &body_length, sizeof(body_length));
  return bytes;
}

absl::StatusOr<AggregationCheckpoint> DecodeCheckpoint(absl::string_view bytes) {
  if (bytes.size() < kCheckpointHeaderBytes) {
    return Corrupt(absl::StrCat(bytes.size(), " bytes, shorter than the ", kCheckpointHeaderBytes, "-byte header"));
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) return Corrupt("bad magic");
  uint32_t version = 0, crc = 0;
  uint64_t body_length = 0;
  std::memcpy(&version, bytes.data() + 8, sizeof(version));
  std::memcpy(&crc, bytes.data() + 12, sizeof(crc));
  std::memcpy(&body_length, bytes.data() + 16, sizeof(body_length));
  if (version < 1 || version > kCheckpointFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint format version ", version, "; this build reads versions 1 to ", kCheckpointFormatVersion));
  }
  const absl::string_view body = bytes.substr(kCheckpointHeaderBytes);
  if (body.size() != body_length) {
    return Corrupt(absl::StrCat("the header declares ", body_length, " body bytes, the file holds ", body.size()));
  }
  if (Crc32cExtend(0, body.data(), body.size()) != crc) return Corrupt("checksum mismatch");

  AggregationCheckpoint checkpoint;
  ByteReader in(body);
  std::string spec;
  FEDAGG_RETURN_IF_ERROR(in.GetString(&spec));
  if (!checkpoint.spec.ParseFromString(spec)) return Corrupt("the aggregation spec does not parse");
  int32_t state = 0;
  FEDAGG_RETURN_IF_ERROR(in.Get(&state));
  if (!v1::AggregationState_IsValid(state) || state == v1::AGGREGATION_STATE_UNSPECIFIED) {
    return Corrupt(absl::StrCat("unknown aggregation state ", state));
  }
  checkpoint.state = static_cast<v1::AggregationState>(state);
  FEDAGG_RETURN_IF_ERROR(in.GetString(&checkpoint.detail));
  FEDAGG_RETURN_IF_ERROR(in.Get(&checkpoint.contributions));
  FEDAGG_RETURN_IF_ERROR(in.Get(&checkpoint.weight_sum));
  FEDAGG_RETURN_IF_ERROR(GetClientIds(in, &checkpoint.counted));
  uint64_t count = 0;
  FEDAGG_RETURN_IF_ERROR(in.Get(&count));
  for (uint64_t i = 0; i < count; ++i) {
    AggregationCheckpoint::ChildProgress child;
    uint8_t final_received = 0;
    FEDAGG_RETURN_IF_ERROR(in.GetString(&child.child_id));
    FEDAGG_RETURN_IF_ERROR(in.Get(&child.last_sequence));
    FEDAGG_RETURN_IF_ERROR(in.Get(&final_received));
    child.final_received = final_received != 0;
    if (version >= 2) {
      uint8_t released = 0;
      FEDAGG_RETURN_IF_ERROR(in.Get(&released));
      child.released = released != 0;
      FEDAGG_RETURN_IF_ERROR(GetClientIds(in, &child.leased));
    }
    checkpoint.children.push_back(std::move(child));
  }
  FEDAGG_RETURN_IF_ERROR(in.GetString(&checkpoint.partial));
  if (version >= 3) {
    std::optional<std::array<uint8_t, 32>> noise_key;
    FEDAGG_RETURN_IF_ERROR(GetKey(in, "a noise key", &noise_key));
    if (noise_key.has_value()) checkpoint.noise_key = NoiseKey{*noise_key};
  }
  if (version >= 4) FEDAGG_RETURN_IF_ERROR(GetKey(in, "a root private key", &checkpoint.secure_root_key));
  if (!in.AtEnd()) return Corrupt("bytes after the partial aggregate");
  return checkpoint;
}

absl::Status WriteFileAtomically(const std::string& dir, const std::string& name, absl::string_view bytes) {
  const std::string path = absl::StrCat(dir, "/", name);
  const std::string temp = absl::StrCat(path, ".tmp");
  {
    ScopedFd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (fd.get() < 0) return ErrnoError("create", temp);
    // The owner's alone (it holds keys and un-noised sums), a leftover file of other
    // permissions included: open's mode applies only to a file it creates.
    if (::fchmod(fd.get(), 0600) != 0) return ErrnoError("chmod", temp);
    FEDAGG_RETURN_IF_ERROR(WriteAll(fd.get(), bytes, temp));
    if (::fsync(fd.get()) != 0) return ErrnoError("fsync", temp);
    if (fd.Close() != 0) return ErrnoError("close", temp);
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) return ErrnoError("rename onto", path);
  ScopedFd directory(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (directory.get() < 0) return ErrnoError("open directory", dir);
  if (::fsync(directory.get()) != 0) return ErrnoError("fsync directory", dir);
  return absl::OkStatus();
}

absl::StatusOr<AggregationCheckpoint> ReadCheckpointFile(const std::string& path) {
  FEDAGG_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  absl::StatusOr<AggregationCheckpoint> checkpoint = DecodeCheckpoint(bytes);
  if (!checkpoint.ok()) {
    return absl::Status(checkpoint.status().code(),
                        absl::StrCat(path, ": ", checkpoint.status().message()));
  }
  if (struct stat file; ::stat(path.c_str(), &file) == 0) checkpoint->written = absl::TimeFromTimespec(file.st_mtim);
  return checkpoint;
}

}  // namespace fedagg
