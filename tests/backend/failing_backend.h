// FailingBackend: a test backend that reduces and serializes like the CPU backend except
// where told to fail as a device backend can — a batch that runs out of device memory
// (RESOURCE_EXHAUSTED) or a partial that cannot be copied back from the device (INTERNAL).
#ifndef FEDAGG_TESTS_BACKEND_FAILING_BACKEND_H_
#define FEDAGG_TESTS_BACKEND_FAILING_BACKEND_H_

#include <memory>

#include "absl/status/status.h"
#include "service/core/accumulator_factory.h"
#include "service/core/cpu_accumulator_factory.h"

namespace fedagg::testing {

struct BackendFailures {
  bool reduce = false;     // every AccumulateBatch fails
  bool serialize = false;  // every SerializeTo fails
};

class FailingAccumulator final : public FieldAccumulator {
 public:
  FailingAccumulator(const FieldSpec& field, BackendFailures failures)
      : cpu_(CpuAccumulatorFactory::Default().Make(field)), failures_(failures) {}
  absl::Status AccumulateBatch(absl::Span<const FieldValue* const> values,
                               absl::Span<const double> weights) override {
    if (failures_.reduce) return absl::ResourceExhaustedError("out of memory on the reduction device");
    return cpu_->AccumulateBatch(values, weights);
  }
  absl::Status MergeWith(const FieldAccumulator& other) override {
    return cpu_->MergeWith(*static_cast<const FailingAccumulator&>(other).cpu_);
  }
  absl::Status SerializeTo(ByteWriter& out) const override {
    if (failures_.serialize) return absl::InternalError("copying the accumulator back from the device failed");
    return cpu_->SerializeTo(out);
  }
  absl::Status DeserializeFrom(ByteReader& in, int64_t contributions) override {
    return cpu_->DeserializeFrom(in, contributions);
  }
  absl::StatusOr<ReportedField> Report(int64_t contributions, double weight_sum) const override {
    return cpu_->Report(contributions, weight_sum);
  }
  uint64_t MemoryBytes() const override { return cpu_->MemoryBytes(); }

 private:
  std::unique_ptr<FieldAccumulator> cpu_;
  const BackendFailures failures_;
};

class FailingBackend final : public AccumulatorFactory {
 public:
  explicit FailingBackend(BackendFailures failures) : failures_(failures) {}
  absl::string_view name() const override { return "failing"; }
  std::unique_ptr<FieldAccumulator> Make(const FieldSpec& field) const override {
    return std::make_unique<FailingAccumulator>(field, failures_);
  }

 private:
  const BackendFailures failures_;
};

}  // namespace fedagg::testing

#endif  // FEDAGG_TESTS_BACKEND_FAILING_BACKEND_H_
