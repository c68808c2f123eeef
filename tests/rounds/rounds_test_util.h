// Helpers for the tests of service/rounds: a small spec (two int64 coordinates summed, so
// every result is exact), aggregations of it, client updates and child partials for it, its
// result, a temporary directory, and a one-shot signal between threads.
#ifndef FEDAGG_TESTS_ROUNDS_ROUNDS_TEST_UTIL_H_
#define FEDAGG_TESTS_ROUNDS_ROUNDS_TEST_UTIL_H_

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "service/core/mutex.h"
#include "service/core/partial_aggregate.h"
#include "service/core/update_buffer.h"
#include "service/rounds/aggregation.h"
#include "service/rounds/spec_conversion.h"
#include "tests/temp_dir.h"

namespace fedagg::testing {

// A one-shot signal on fedagg's Mutex, whose happens-before edges ThreadSanitizer sees
// (the packaged Abseil's absl::Notification it cannot).
class Signal {
 public:
  void Raise() {
    MutexLock lock(&mu_);
    raised_ = true;
  }
  bool Raised() {
    MutexLock lock(&mu_);
    return raised_;
  }
  bool WaitFor(absl::Duration timeout) {
    MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return raised_; }, timeout);
  }

 private:
  Mutex mu_;
  bool raised_ ABSL_GUARDED_BY(mu_) = false;
};

// <w=int64[2]> with federated_sum: an update [1, v] adds one to w[0] and v to w[1].
inline v1::AggregationSpec CountingSpec(const std::string& id) {
  v1::AggregationSpec spec;
  spec.set_aggregation_id(id);
  absl::StatusOr<ValueType> type = ParseValueType("<w=int64[2]>");
  EXPECT_TRUE(type.ok()) << type.status();
  *spec.mutable_value_type() = ValueTypeToProto(*type);
  spec.add_intrinsics()->set_intrinsic(v1::FEDERATED_SUM);
  spec.set_min_contributions(1);
  return spec;
}

inline UpdateBuffer CountingUpdate(const ReductionSpec& spec, int64_t value) {
  absl::StatusOr<UpdateBuffer> buffer = UpdateBuffer::Create(spec, {0}, std::nullopt, 1 << 20);
  EXPECT_TRUE(buffer.ok()) << buffer.status();
  const int64_t values[2] = {1, value};
  std::memcpy(buffer->section(0, UpdateBuffer::Section::kValues).data(), values, sizeof(values));
  return *std::move(buffer);
}

// An aggregation of CountingSpec(id), sealed by its max_contributions'th update (0: none).
inline std::shared_ptr<Aggregation> NewCountingAggregation(const std::string& id, const AggregationOptions& options,
                                                           int64_t max_contributions = 0) {
  v1::AggregationSpec spec = CountingSpec(id);
  spec.set_max_contributions(max_contributions);
  absl::StatusOr<AggregationConfig> config = ConfigFromProto(spec);
  EXPECT_TRUE(config.ok()) << config.status();
  return std::make_shared<Aggregation>(*std::move(config), options);
}

// Counts client `client_id`'s update [1, value] (asserting that it is accepted).
inline void Contribute(Aggregation& aggregation, const std::string& client_id, int64_t value) {
  ASSERT_TRUE(aggregation.BeginUpdate(client_id).ok());
  ASSERT_TRUE(aggregation.CommitUpdate(client_id, CountingUpdate(aggregation.reduction(), value)).ok());
}

// A child's partial holding one update [1, value], as the aggregation decodes it from the
// child's push.
inline PartialAggregate ChildPartial(const Aggregation& aggregation, int64_t value) {
  PartialAggregate partial(aggregation.config().reduction);
  UpdateBuffer update = CountingUpdate(aggregation.reduction(), value);
  EXPECT_TRUE(partial.Accumulate(update.view()).ok());
  absl::StatusOr<std::string> bytes = partial.Serialize();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  const std::string serialized = bytes.ok() ? *std::move(bytes) : std::string();
  ByteReader in(serialized);
  absl::StatusOr<PartialAggregate> decoded = aggregation.DecodeChildPartial("edge@1", in);
  EXPECT_TRUE(decoded.ok()) << decoded.status();
  return decoded.ok() ? *std::move(decoded) : PartialAggregate(aggregation.config().reduction);
}

// The result's w as [count, sum].
inline std::vector<int64_t> ResultOf(const Aggregation& aggregation) {
  absl::StatusOr<std::shared_ptr<const AggregateResult>> result = aggregation.Result();
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return {};
  const Tensor& w = (*result)->fields.at(0).value;
  std::vector<int64_t> out(2);
  std::memcpy(out.data(), w.bytes.data(), sizeof(int64_t) * 2);
  return out;
}

template <typename T>
T ValueOrDie(absl::StatusOr<T> status_or) {
  if (!status_or.ok()) {
    ADD_FAILURE() << status_or.status();
    std::abort();
  }
  return *std::move(status_or);
}

}  // namespace fedagg::testing

#endif  // FEDAGG_TESTS_ROUNDS_ROUNDS_TEST_UTIL_H_
