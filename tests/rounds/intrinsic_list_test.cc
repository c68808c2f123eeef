// Intrinsics as a command line writes them (ParseIntrinsicList): counts, a field's own clip
// bound under differential privacy, an encoding, and refusals of what is none of these.
#include "gtest/gtest.h"
#include "service/rounds/spec_conversion.h"

namespace fedagg {
namespace {

TEST(IntrinsicListTest, ModifiersAndEncodingsOfEachField) {
  absl::StatusOr<std::vector<v1::FieldIntrinsic>> fields =
      ParseIntrinsicList("federated_mean+clip=0.5@quantized:8,sparse_sum+counts,sparse_mean+clip=2+counts,federated_sum");
  ASSERT_TRUE(fields.ok()) << fields.status();
  ASSERT_EQ(fields->size(), 4u);
  EXPECT_EQ((*fields)[0].intrinsic(), v1::FEDERATED_MEAN);
  EXPECT_EQ((*fields)[0].clip_norm(), 0.5);
  EXPECT_EQ((*fields)[0].encoding().kind(), v1::FieldEncoding::QUANTIZED);
  EXPECT_TRUE((*fields)[1].report_counts());
  EXPECT_EQ((*fields)[1].clip_norm(), 0);
  EXPECT_TRUE((*fields)[2].report_counts());
  EXPECT_EQ((*fields)[2].clip_norm(), 2);
  EXPECT_FALSE((*fields)[3].report_counts());
  EXPECT_EQ((*fields)[3].encoding().kind(), v1::FieldEncoding::PLAIN);
}

TEST(IntrinsicListTest, WhatIsNotAModifierIsRefused) {
  for (const char* list : {"federated_mean+clip=0", "federated_mean+clip=-1", "federated_mean+clip=x",
                           "federated_mean+clip=inf", "federated_mean+count", "federated_mean+", "federated_meen"}) {
    EXPECT_EQ(ParseIntrinsicList(list).status().code(), absl::StatusCode::kInvalidArgument) << list;
  }
}

}  // namespace
}  // namespace fedagg
