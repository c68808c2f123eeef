// CPU accumulator for the dense intrinsics.
#include "service/core/cpu_dense_accumulator.h"

#include <limits>

#include "service/core/cpu_kernels.h"

namespace fedagg {
namespace {
// Below this many elements per thread, splitting costs more than it saves.
constexpr int64_t kMinElementsPerThread = 1 << 15;

template <typename Acc>
Acc InitialValue(Intrinsic intrinsic) {
  if (intrinsic == Intrinsic::kFederatedMax) {
    return std::numeric_limits<Acc>::has_infinity ? -std::numeric_limits<Acc>::infinity()
                                                  : std::numeric_limits<Acc>::lowest();
  }
  if (intrinsic == Intrinsic::kFederatedMin) {
    return std::numeric_limits<Acc>::has_infinity ? std::numeric_limits<Acc>::infinity()
                                                  : std::numeric_limits<Acc>::max();
  }
  return Acc{0};
}

// Writes acc[i] / divisor (or acc[i] itself when divisor is 0) as the result dtype.
template <typename Acc>
void WriteScaled(const std::vector<Acc>& acc, double divisor, Tensor& out) {
  cpu::DispatchDType(out.dtype, [&](auto tag) {
    using Out = typename decltype(tag)::type;
    if constexpr (std::is_same_v<Out, float> || std::is_same_v<Out, double> ||
                  std::is_same_v<Out, int64_t>) {
      absl::Span<Out> dst = out.mutable_values<Out>();
      if (divisor == 0) {
        for (size_t i = 0; i < acc.size(); ++i) dst[i] = static_cast<Out>(acc[i]);
      } else {
        // Divide in the accumulation precision (or float64 for integer sums).
        using Div = std::conditional_t<std::is_integral_v<Acc>, double, Acc>;
        const Div d = static_cast<Div>(divisor);
        for (size_t i = 0; i < acc.size(); ++i) dst[i] = static_cast<Out>(static_cast<Div>(acc[i]) / d);
      }
    }
  });
}
}  // namespace

template <typename Acc>
CpuDenseAccumulator<Acc>::CpuDenseAccumulator(const FieldSpec& field, ThreadPool& pool)
    : field_(field),
      pool_(pool),
      acc_(static_cast<size_t>(field.type.num_elements()), InitialValue<Acc>(field.intrinsic)) {}

template <typename Acc>
bool CpuDenseAccumulator<Acc>::is_extreme() const {
  return field_.intrinsic == Intrinsic::kFederatedMax ||
         field_.intrinsic == Intrinsic::kFederatedMin;
}

template <typename Acc>
absl::Status CpuDenseAccumulator<Acc>::AccumulateBatch(absl::Span<const FieldValue* const> values,
                                               absl::Span<const double> weights) {
  if (values.empty() || acc_.empty()) return absl::OkStatus();
  std::vector<Acc> acc_weights;
  if (field_.intrinsic == Intrinsic::kFederatedWeightedMean) {
    acc_weights.assign(weights.begin(), weights.end());
  }
  cpu::DispatchDType(field_.type.dtype, [&](auto tag) {
    using In = typename decltype(tag)::type;
    std::vector<const In*> rows(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      rows[i] = reinterpret_cast<const In*>(values[i]->values.data());
    }
    Acc* acc = acc_.data();
    pool_.ParallelFor(static_cast<int64_t>(acc_.size()), kMinElementsPerThread,
                      [&](int64_t begin, int64_t end) {
                        switch (field_.intrinsic) {
                          case Intrinsic::kFederatedMax:
                            cpu::ExtremeRows<true>(acc, rows.data(), rows.size(), begin, end);
                            break;
                          case Intrinsic::kFederatedMin:
                            cpu::ExtremeRows<false>(acc, rows.data(), rows.size(), begin, end);
                            break;
                          default:
                            cpu::AddRows(acc, rows.data(),
                                         acc_weights.empty() ? nullptr : acc_weights.data(),
                                         rows.size(), begin, end);
                        }
                      });
  });
  return absl::OkStatus();
}

template <typename Acc>
absl::Status CpuDenseAccumulator<Acc>::MergeWith(const FieldAccumulator& other_base) {
  const auto& other = static_cast<const CpuDenseAccumulator<Acc>&>(other_base);
  const Acc* row = other.acc_.data();
  Acc* acc = acc_.data();
  const bool extreme = is_extreme();
  const bool is_max = field_.intrinsic == Intrinsic::kFederatedMax;
  pool_.ParallelFor(static_cast<int64_t>(acc_.size()), kMinElementsPerThread,
                    [&](int64_t begin, int64_t end) {
                      if (!extreme) {
                        cpu::AddRows(acc, &row, static_cast<const Acc*>(nullptr), 1, begin, end);
                      } else if (is_max) {
                        cpu::ExtremeRows<true>(acc, &row, 1, begin, end);
                      } else {
                        cpu::ExtremeRows<false>(acc, &row, 1, begin, end);
                      }
                    });
  return absl::OkStatus();
}

template <typename Acc>
absl::Status CpuDenseAccumulator<Acc>::SerializeTo(ByteWriter& out) const {
  out.PutArray(acc_.data(), acc_.size());
  return absl::OkStatus();
}

template <typename Acc>
absl::Status CpuDenseAccumulator<Acc>::DeserializeFrom(ByteReader& in, int64_t) {
  return in.GetArrayExact(acc_.data(), acc_.size(), absl::StrCat("field '", field_.path, "'"));
}

template <typename Acc>
absl::StatusOr<ReportedField> CpuDenseAccumulator<Acc>::Report(int64_t contributions, double weight_sum) const {
  ReportedField out{field_.path, field_.intrinsic, Tensor{field_.result_dtype, field_.type.shape, {}}};
  out.value.bytes.resize(acc_.size() * DTypeSize(field_.result_dtype));
  double divisor = 0;
  if (field_.intrinsic == Intrinsic::kFederatedMean) divisor = static_cast<double>(contributions);
  if (field_.intrinsic == Intrinsic::kFederatedWeightedMean) divisor = weight_sum;
  WriteScaled(acc_, divisor, out.value);
  return out;
}

template <typename Acc>
uint64_t CpuDenseAccumulator<Acc>::MemoryBytes() const {
  return acc_.capacity() * sizeof(acc_[0]);
}

template class CpuDenseAccumulator<float>;
template class CpuDenseAccumulator<double>;
template class CpuDenseAccumulator<int64_t>;

}  // namespace fedagg
