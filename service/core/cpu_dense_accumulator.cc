// CPU accumulator for the dense intrinsics.
#include "service/core/cpu_dense_accumulator.h"

#include <algorithm>
#include <limits>
#include <type_traits>

#include "service/core/cpu_decode_kernels.h"
#include "service/core/cpu_kernels.h"
#include "service/core/field_report.h"

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
  if (field_.value_encoding.encoded()) {
    AccumulateEncoded(values, acc_weights.empty() ? nullptr : acc_weights.data());
    return absl::OkStatus();
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
void CpuDenseAccumulator<Acc>::AccumulateEncoded(absl::Span<const FieldValue* const> values, const Acc* weights) {
  std::vector<const std::byte*> rows(values.size());
  for (size_t i = 0; i < values.size(); ++i) rows[i] = values[i]->values.data();
  const ValueEncoding& encoding = field_.value_encoding;
  const int64_t elements = static_cast<int64_t>(acc_.size());
  Acc* acc = acc_.data();
  // Column ranges start on a block, so that no two threads read one block's scale row by
  // row for the same columns (and a range of 1-bit codes starts on a byte).
  const int64_t grain = encoding.quantized() ? encoding.block_size : 1;
  pool_.ParallelFor((elements + grain - 1) / grain, std::max<int64_t>(1, kMinElementsPerThread / grain),
                    [&](int64_t begin, int64_t end) {
                      const int64_t first = begin * grain, last = std::min(elements, end * grain);
                      if constexpr (std::is_same_v<Acc, int64_t>) {
                        cpu::AddDiscretizedRows(acc, rows.data(), rows.size(), encoding.bits, first, last);
                      } else {
                        cpu::AddQuantizedRows(acc, rows.data(), weights, rows.size(), encoding, elements, first,
                                              last);
                      }
                    });
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
  return ReportDense<Acc>(field_, acc_, contributions, weight_sum);
}

template <typename Acc>
uint64_t CpuDenseAccumulator<Acc>::MemoryBytes() const {
  return acc_.capacity() * sizeof(acc_[0]);
}

template class CpuDenseAccumulator<float>;
template class CpuDenseAccumulator<double>;
template class CpuDenseAccumulator<int64_t>;

}  // namespace fedagg
