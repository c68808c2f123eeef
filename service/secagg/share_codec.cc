// Little-endian encoding of secure aggregation's share messages.
#include "service/secagg/share_codec.h"

#include <cstring>

namespace fedagg {
namespace {

constexpr uint32_t kMaxLimbs = 64;

template <typename T>
void Put(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

class Reader {
 public:
  explicit Reader(const std::string& bytes) : bytes_(bytes) {}
  template <typename T>
  bool Get(T& value) {
    if (bytes_.size() - at_ < sizeof(T)) return false;
    std::memcpy(&value, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  bool done() const { return at_ == bytes_.size(); }

 private:
  const std::string& bytes_;
  size_t at_ = 0;
};

void PutShare(std::string& out, const ShamirShare& share) {
  Put<uint32_t>(out, share.x);
  Put<uint32_t>(out, static_cast<uint32_t>(share.y.size()));
  for (uint64_t y : share.y) Put<uint64_t>(out, y);
}

bool GetShare(Reader& in, ShamirShare& share) {
  uint32_t limbs = 0;
  if (!in.Get(share.x) || !in.Get(limbs) || limbs > kMaxLimbs) return false;
  share.y.resize(limbs);
  for (uint64_t& y : share.y) {
    if (!in.Get(y)) return false;
  }
  return true;
}

absl::Status Malformed(const char* what) {
  return absl::DataLossError(std::string("a ") + what + " message is malformed");
}

}  // namespace

std::string EncodeKeyShares(const ShamirShare& self_mask_seed, const ShamirShare& mask_key) {
  std::string out;
  PutShare(out, self_mask_seed);
  PutShare(out, mask_key);
  return out;
}

absl::StatusOr<std::pair<ShamirShare, ShamirShare>> DecodeKeyShares(const std::string& bytes) {
  Reader in(bytes);
  std::pair<ShamirShare, ShamirShare> shares;
  if (!GetShare(in, shares.first) || !GetShare(in, shares.second) || !in.done()) return Malformed("key-share");
  return shares;
}

std::string EncodeRevealedShares(const std::vector<RevealedShare>& shares) {
  std::string out;
  Put<uint32_t>(out, static_cast<uint32_t>(shares.size()));
  for (const RevealedShare& revealed : shares) {
    Put<uint32_t>(out, static_cast<uint32_t>(revealed.owner));
    Put<uint8_t>(out, static_cast<uint8_t>(revealed.kind));
    PutShare(out, revealed.share);
  }
  return out;
}

absl::StatusOr<std::vector<RevealedShare>> DecodeRevealedShares(const std::string& bytes) {
  Reader in(bytes);
  uint32_t count = 0;
  if (!in.Get(count) || count > bytes.size()) return Malformed("unmasking");
  std::vector<RevealedShare> shares(count);
  for (RevealedShare& revealed : shares) {
    uint32_t owner = 0;
    uint8_t kind = 0;
    if (!in.Get(owner) || !in.Get(kind) || kind > 1 || owner > (1u << 30) || !GetShare(in, revealed.share)) {
      return Malformed("unmasking");
    }
    revealed.owner = static_cast<int>(owner);
    revealed.kind = static_cast<SecretKind>(kind);
  }
  if (!in.done()) return Malformed("unmasking");
  return shares;
}

}  // namespace fedagg
