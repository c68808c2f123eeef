// Tests of the federated intrinsics' names, encodings and properties.
#include "service/core/intrinsic.h"

#include <set>
#include <string>

#include "gtest/gtest.h"
#include "tests/core/core_test_util.h"

namespace fedagg {
namespace {

using ::fedagg::testing::kAllIntrinsics;
using ::fedagg::testing::StatusIs;

TEST(IntrinsicTest, NamesRoundTripAndAreDistinct) {
  std::set<std::string> names;
  for (Intrinsic intrinsic : kAllIntrinsics) {
    const std::string name(IntrinsicName(intrinsic));
    EXPECT_TRUE(names.insert(name).second) << name;
    absl::StatusOr<Intrinsic> parsed = ParseIntrinsic(name);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, intrinsic);
    EXPECT_TRUE(IsValidIntrinsic(static_cast<uint8_t>(intrinsic)));
  }
  EXPECT_EQ(names.size(), 11u);
  EXPECT_EQ(IntrinsicName(Intrinsic::kFederatedWeightedMean), "federated_weighted_mean");
  EXPECT_EQ(IntrinsicName(Intrinsic::kRowSparseMean), "row_sparse_mean");
  EXPECT_EQ(IntrinsicName(Intrinsic::kSparseSumSparse), "sparse_sum_sparse");
}

TEST(IntrinsicTest, UnknownNamesAndValues) {
  EXPECT_TRUE(StatusIs(ParseIntrinsic("federated_median"), absl::StatusCode::kInvalidArgument,
                       "unknown intrinsic 'federated_median'"));
  EXPECT_TRUE(StatusIs(ParseIntrinsic(""), absl::StatusCode::kInvalidArgument, "unknown intrinsic"));
  EXPECT_TRUE(StatusIs(ParseIntrinsic("Federated_Sum"), absl::StatusCode::kInvalidArgument,
                       "unknown intrinsic"));
  EXPECT_FALSE(IsValidIntrinsic(0));
  EXPECT_FALSE(IsValidIntrinsic(12));
  EXPECT_FALSE(IsValidIntrinsic(255));
}

TEST(IntrinsicTest, EncodingsAndProperties) {
  struct Expected {
    Intrinsic intrinsic;
    Encoding encoding;
    bool weighted;
    bool needs_counts;
  };
  for (const Expected& e : {
           Expected{Intrinsic::kFederatedSum, Encoding::kDense, false, false},
           Expected{Intrinsic::kFederatedMean, Encoding::kDense, false, false},
           Expected{Intrinsic::kFederatedWeightedMean, Encoding::kDense, true, false},
           Expected{Intrinsic::kFederatedMax, Encoding::kDense, false, false},
           Expected{Intrinsic::kFederatedMin, Encoding::kDense, false, false},
           Expected{Intrinsic::kSparseSum, Encoding::kSparse, false, false},
           Expected{Intrinsic::kSparseSumSparse, Encoding::kSparse, false, true},
           Expected{Intrinsic::kSparseMean, Encoding::kSparse, false, true},
           Expected{Intrinsic::kSparseWeightedMean, Encoding::kSparse, true, true},
           Expected{Intrinsic::kRowSparseSum, Encoding::kRowSparse, false, false},
           Expected{Intrinsic::kRowSparseMean, Encoding::kRowSparse, false, true},
       }) {
    SCOPED_TRACE(IntrinsicName(e.intrinsic));
    EXPECT_EQ(EncodingOf(e.intrinsic), e.encoding);
    EXPECT_EQ(IsWeighted(e.intrinsic), e.weighted);
    EXPECT_EQ(NeedsCoordinateCounts(e.intrinsic), e.needs_counts);
    EXPECT_EQ(IsSparseFamily(e.intrinsic), e.encoding != Encoding::kDense);
  }
  EXPECT_EQ(EncodingName(Encoding::kDense), "dense");
  EXPECT_EQ(EncodingName(Encoding::kSparse), "sparse");
  EXPECT_EQ(EncodingName(Encoding::kRowSparse), "row-sparse");
}

}  // namespace
}  // namespace fedagg
