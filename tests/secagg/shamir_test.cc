// Shamir sharing over GF(2^61 - 1): any threshold of shares gives the secret back, fewer
// are refused, and a changed share is found rather than giving a wrong secret.
#include "service/secagg/shamir.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "gtest/gtest.h"

namespace fedagg {
namespace {

std::vector<uint32_t> Points(int n) {
  std::vector<uint32_t> points(static_cast<size_t>(n));
  std::iota(points.begin(), points.end(), 1u);
  return points;
}

TEST(ShamirTest, AnyThresholdOfSharesRecoversSecretsOfEveryLength) {
  std::mt19937_64 rng(11);
  for (size_t bytes : {size_t{1}, size_t{7}, size_t{8}, size_t{32}, size_t{33}}) {
    for (int threshold : {1, 2, 5, 9}) {
      std::vector<uint8_t> secret(bytes);
      for (uint8_t& b : secret) b = static_cast<uint8_t>(rng());
      std::vector<uint32_t> points = Points(12);
      std::shuffle(points.begin(), points.end(), rng);  // any points, in any order
      absl::StatusOr<std::vector<ShamirShare>> shares = ShareSecret(secret, threshold, points);
      ASSERT_TRUE(shares.ok()) << shares.status();
      for (int trial = 0; trial < 5; ++trial) {
        std::shuffle(shares->begin(), shares->end(), rng);
        const size_t used = static_cast<size_t>(threshold) + static_cast<size_t>(rng() % 3);
        absl::StatusOr<std::vector<uint8_t>> recovered =
            RecoverSecret(absl::MakeConstSpan(*shares).first(std::min(used, shares->size())), threshold, bytes);
        ASSERT_TRUE(recovered.ok()) << recovered.status();
        EXPECT_EQ(*recovered, secret) << bytes << " bytes, threshold " << threshold;
      }
    }
  }
}

TEST(ShamirTest, FewerThanTheThresholdAreRefused) {
  const std::vector<uint8_t> secret(32, 0xab);
  absl::StatusOr<std::vector<ShamirShare>> shares = ShareSecret(secret, 4, Points(6));
  ASSERT_TRUE(shares.ok());
  EXPECT_EQ(RecoverSecret(absl::MakeConstSpan(*shares).first(3), 4, 32).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ShareSecret(secret, 7, Points(6)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ShareSecret(secret, 2, {1, 1, 2}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ShareSecret(secret, 2, {0, 1}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ShamirTest, AChangedShareIsFoundWhenOneMoreThanTheThresholdIsGiven) {
  std::mt19937_64 rng(12);
  std::vector<uint8_t> secret(32);
  for (uint8_t& b : secret) b = static_cast<uint8_t>(rng());
  absl::StatusOr<std::vector<ShamirShare>> shares = ShareSecret(secret, 5, Points(8));
  ASSERT_TRUE(shares.ok());
  for (size_t changed = 0; changed < 6; ++changed) {  // in the basis, or the one checked
    std::vector<ShamirShare> tampered(shares->begin(), shares->begin() + 6);
    tampered[changed].y[2] = (tampered[changed].y[2] + 1) % kShamirPrime;
    EXPECT_EQ(RecoverSecret(tampered, 5, 32).status().code(), absl::StatusCode::kDataLoss) << "share " << changed;
  }
  std::vector<ShamirShare> out_of_field(shares->begin(), shares->begin() + 5);
  out_of_field[0].y[0] = kShamirPrime;
  EXPECT_EQ(RecoverSecret(out_of_field, 5, 32).status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace fedagg
