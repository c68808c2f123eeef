// FieldAccumulator over a FieldReducer, and the factory that makes them.
#include "portable/portable_accumulator_factory.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "service/core/field_report.h"
#include "service/core/status_macros.h"

namespace fedagg {
namespace {

using portable::HostState;
using portable::ReducerKind;

absl::Status ToStatus(const portable::Outcome& outcome, const FieldSpec& field) {
  const std::string message = absl::StrCat("field '", field.path, "': ", outcome.message);
  switch (outcome.code) {
    case portable::Outcome::Code::kOk: return absl::OkStatus();
    case portable::Outcome::Code::kResourceExhausted: return absl::ResourceExhaustedError(message);
    case portable::Outcome::Code::kInvalidArgument: return absl::InvalidArgumentError(message);
    case portable::Outcome::Code::kInternal: return absl::InternalError(message);
  }
  return absl::InternalError(message);
}

// The state in the layout of the CPU accumulators' SerializeTo.
template <typename Acc>
void PutState(const HostState<Acc>& state, ReducerKind kind, ByteWriter& out) {
  if (kind == ReducerKind::kUnion) out.PutArray(state.indices.data(), state.indices.size());
  out.PutArray(state.values.data(), state.values.size());
  if (kind == ReducerKind::kDense) return;
  out.PutArray(state.counts.data(), state.counts.size());
  if (kind == ReducerKind::kScatter) out.PutArray(state.weight_sums.data(), state.weight_sums.size());
}

template <typename Acc>
absl::Status GetState(ByteReader& in, ReducerKind kind, HostState<Acc>* state) {
  if (kind == ReducerKind::kUnion) FEDAGG_RETURN_IF_ERROR(in.GetArray(&state->indices));
  FEDAGG_RETURN_IF_ERROR(in.GetArray(&state->values));
  if (kind == ReducerKind::kDense) return absl::OkStatus();
  FEDAGG_RETURN_IF_ERROR(in.GetArray(&state->counts));
  if (kind == ReducerKind::kScatter) FEDAGG_RETURN_IF_ERROR(in.GetArray(&state->weight_sums));
  return absl::OkStatus();
}

portable::ResultRequest RequestOf(const ResultDivision& division) {
  using Divide = portable::ResultRequest::Divide;
  portable::ResultRequest request;
  switch (division.by) {
    case ResultDivision::By::kNothing: request.divide = Divide::kNone; break;
    case ResultDivision::By::kScalar: request.divide = Divide::kByScalar; break;
    case ResultDivision::By::kRowCount: request.divide = Divide::kByRowCount; break;
    case ResultDivision::By::kRowWeightSum: request.divide = Divide::kByRowWeightSum; break;
  }
  request.scalar = division.scalar;
  return request;
}

template <typename Acc>
class PortableAccumulator final : public FieldAccumulator {
 public:
  // `host` checks serialized partials (PortableAccumulatorFactory's).
  PortableAccumulator(const FieldSpec& field, const AccumulatorFactory& host,
                      std::unique_ptr<portable::FieldReducer<Acc>> reducer)
      : field_(field), host_(host), kind_(ReducerSpecOf(field).kind), reducer_(std::move(reducer)) {}

  absl::Status AccumulateBatch(absl::Span<const FieldValue* const> values,
                               absl::Span<const double> weights) override {
    const size_t n = values.size();
    std::vector<const int64_t*> indices(n);
    std::vector<int64_t> entries(n);
    std::vector<const void*> data(n);
    std::unique_ptr<bool[]> ascending(new bool[n]);
    for (size_t i = 0; i < n; ++i) {
      ascending[i] = values[i]->ascending;
      indices[i] = values[i]->indices.data();
      entries[i] = kind_ == ReducerKind::kDense ? field_.row_width
                                                : static_cast<int64_t>(values[i]->indices.size());
      data[i] = values[i]->values.data();
    }
    const portable::HostBatch batch{static_cast<int64_t>(n), indices.data(), entries.data(),
                                    data.data(), weights.data(), ascending.get()};
    return ToStatus(reducer_->Accumulate(batch), field_);
  }

  absl::Status MergeWith(const FieldAccumulator& other) override {
    return ToStatus(reducer_->Merge(*static_cast<const PortableAccumulator&>(other).reducer_), field_);
  }

  absl::Status SerializeTo(ByteWriter& out) const override {
    HostState<Acc> state;
    FEDAGG_RETURN_IF_ERROR(ToStatus(reducer_->Save(&state), field_));
    PutState(state, kind_, out);
    return absl::OkStatus();
  }

  // The CPU accumulator checks the bytes; its own serialization is then loaded. Each host
  // copy of the field is freed before the one after next is made: at most two at once.
  absl::Status DeserializeFrom(ByteReader& in, int64_t contributions) override {
    HostState<Acc> state;
    {
      std::string bytes;
      {
        std::unique_ptr<FieldAccumulator> checked = host_.Make(field_);
        FEDAGG_RETURN_IF_ERROR(checked->DeserializeFrom(in, contributions));
        ByteWriter writer;
        FEDAGG_RETURN_IF_ERROR(checked->SerializeTo(writer));
        bytes = writer.Take();
      }
      ByteReader reader(bytes);
      FEDAGG_RETURN_IF_ERROR(GetState(reader, kind_, &state));
    }
    return ToStatus(reducer_->Load(state), field_);
  }

  // A dense or scatter field's result is made on the device (divided there as
  // DivisionOf says) and copied out into the result itself; sparse_sum_sparse's, whose
  // size the state decides, from a host copy of the state.
  absl::StatusOr<ReportedField> Report(int64_t contributions, double weight_sum) const override {
    if (kind_ != ReducerKind::kUnion) {
      return ReportWritten(field_, [&](ReportedField& out) {
        portable::ResultRequest request = RequestOf(DivisionOf(field_, contributions, weight_sum));
        if (field_.value_encoding.discretized()) {  // integer steps times the scale, made on the device
          request.type = field_.result_dtype == DType::kFloat64 ? portable::ResultRequest::Type::kFloat64
                                                                : portable::ResultRequest::Type::kFloat32;
          request.step = field_.value_encoding.scale;
          request.modulus_bits = field_.modulus_bits;
        } else if (field_.result_dtype == DType::kFloat64 && field_.accumulation_dtype != DType::kFloat64) {
          request.type = portable::ResultRequest::Type::kFloat64;  // an integer state's mean
        }
        request.values = out.value.bytes.data();
        request.count = static_cast<size_t>(field_.type.num_elements());
        request.counts = field_.report_counts ? out.counts.data() : nullptr;
        if (field_.value_encoding.rotated()) {  // rotated back once, on the device
          request.rotation = field_.value_encoding.rotation;
          request.rotation_seed = field_.value_encoding.rotation_seed;
        }
        FEDAGG_RETURN_IF_ERROR(ToStatus(reducer_->SaveResult(request), field_));
        return absl::OkStatus();
      });
    }
    HostState<Acc> state;
    FEDAGG_RETURN_IF_ERROR(ToStatus(reducer_->Save(&state), field_));
    const UnionPiece<Acc> whole{state.indices, state.values, state.counts};
    return ReportUnion<Acc>(field_, absl::MakeConstSpan(&whole, 1));
  }

  uint64_t MemoryBytes() const override { return reducer_->HostBytes(); }

 private:
  const FieldSpec& field_;
  const AccumulatorFactory& host_;
  const ReducerKind kind_;
  std::unique_ptr<portable::FieldReducer<Acc>> reducer_;
};

}  // namespace

portable::ReducerSpec ReducerSpecOf(const FieldSpec& field) {
  portable::ReducerSpec spec;
  spec.in = static_cast<portable::InType>(field.type.dtype);
  switch (field.intrinsic) {
    case Intrinsic::kFederatedWeightedMean:
    case Intrinsic::kSparseWeightedMean: spec.op = portable::ReducerOp::kWeightedSum; break;
    case Intrinsic::kFederatedMax: spec.op = portable::ReducerOp::kMax; break;
    case Intrinsic::kFederatedMin: spec.op = portable::ReducerOp::kMin; break;
    default: spec.op = portable::ReducerOp::kSum;
  }
  if (field.encoding == Encoding::kDense) {
    spec.kind = ReducerKind::kDense;
    spec.rows = 1;
    spec.row_width = field.type.num_elements();
    if (field.value_encoding.quantized()) {
      spec.quantized_bits = field.value_encoding.bits;
      spec.block = field.value_encoding.block_size;
    } else if (field.value_encoding.discretized()) {  // integer steps, summed into int64
      const int bits = field.value_encoding.bits;
      spec.in = bits == 8 ? portable::InType::kI8 : bits == 16 ? portable::InType::kI16 : portable::InType::kI32;
    }
  } else if (field.intrinsic == Intrinsic::kSparseSumSparse) {
    spec.kind = ReducerKind::kUnion;
    spec.rows = field.rows;
    spec.row_width = 1;
  } else {
    spec.kind = ReducerKind::kScatter;
    spec.rows = field.rows;
    spec.row_width = field.row_width;
    spec.keeps_counts = field.keeps_counts;
    spec.keeps_weight_sums = field.keeps_weight_sums;
  }
  return spec;
}

std::unique_ptr<FieldAccumulator> PortableAccumulatorFactory::Make(const FieldSpec& field) const {
  // A deterministic aggregation's summed float fields are summed exactly, on the host's
  // cores: the cpu backend's accumulator and format. Encoded dense fields are summed on
  // the device: quantized ones decoded as they are added, discretized ones as integer
  // steps into int64 sums (a sparse field's encoded values arrive decoded:
  // service/core/decoding_field_accumulator.h).
  if (field.exact_sum) return host_.Make(field);
  const portable::ReducerSpec spec = ReducerSpecOf(field);
  switch (field.accumulation_dtype) {
    case DType::kFloat64: return std::make_unique<PortableAccumulator<double>>(field, host_, makers_.f64(spec));
    case DType::kInt64: return std::make_unique<PortableAccumulator<int64_t>>(field, host_, makers_.i64(spec));
    default: return std::make_unique<PortableAccumulator<float>>(field, host_, makers_.f32(spec));
  }
}

std::vector<const StagingRingStats*> PortableAccumulatorFactory::staging_rings() const {
  std::vector<const StagingRingStats*> rings;
  for (const auto& ring : rings_) rings.push_back(ring.get());
  return rings;
}

}  // namespace fedagg
