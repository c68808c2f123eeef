// ReductionSpec: validation of a value type against its per-field intrinsics, and the
// accumulation / result dtypes each field gets.
#include "service/core/reduction_spec.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "service/core/exact_sums.h"
#include "service/core/status_macros.h"

namespace fedagg {
namespace {

bool IsMeanFamily(Intrinsic intrinsic) {
  return intrinsic == Intrinsic::kFederatedMean || intrinsic == Intrinsic::kSparseMean ||
         intrinsic == Intrinsic::kRowSparseMean;
}

// Integers sum exactly in int64; weighted integers and all floats go through floating
// point: float64 for float64 input (or when asked), float32 otherwise.
DType AccumulationDType(DType input, Intrinsic intrinsic, const ReductionOptions& options) {
  if (IsInteger(input)) return IsWeighted(intrinsic) ? DType::kFloat64 : DType::kInt64;
  if (input == DType::kFloat64 || options.float64_accumulation) return DType::kFloat64;
  return DType::kFloat32;
}

DType ResultDType(DType accumulation, Intrinsic intrinsic) {
  if (accumulation == DType::kInt64 && IsMeanFamily(intrinsic)) return DType::kFloat64;
  return accumulation;
}

// Which fields may declare a value encoding, and with which options: the linear
// intrinsics over floating values, dense and sparse (a sparse field's indices stay exact;
// its values are encoded); a discretized field sums integers, so it takes no weights; a
// quantized field's decoded values are not exact, so not in a deterministic aggregation.
absl::Status CheckValueEncoding(const LeafField& leaf, Intrinsic intrinsic, const ValueEncoding& encoding,
                                const ReductionOptions& options) {
  if (!encoding.encoded()) return absl::OkStatus();
  const auto refuse = [&](absl::StatusCode code, absl::string_view why) {
    return absl::Status(code, absl::StrCat("field '", leaf.path, "' (", leaf.type.ToString(), ", ",
                                           IntrinsicName(intrinsic), ") declares encoding ",
                                           encoding.ToString(), ": ", why));
  };
  FEDAGG_RETURN_IF_ERROR(encoding.Check());
  if (!IsFloating(leaf.type.dtype)) {
    return refuse(absl::StatusCode::kInvalidArgument,
                  "only floating-point fields are encoded; integer values are sent and summed exactly as they are");
  }
  if (intrinsic == Intrinsic::kFederatedMax || intrinsic == Intrinsic::kFederatedMin) {
    return refuse(absl::StatusCode::kInvalidArgument,
                  "encoded values are exact only in expectation (stochastic rounding), which a sum or mean "
                  "keeps but a maximum or minimum does not; send this field plain");
  }
  if (encoding.discretized() && IsWeighted(intrinsic)) {
    return refuse(absl::StatusCode::kInvalidArgument,
                  "a discretized field is summed exactly as integers, which a weight would break; multiply "
                  "the values by the weight before discretizing and use federated_sum, or use a quantized "
                  "encoding");
  }
  if (encoding.quantized() && options.deterministic) {
    return refuse(absl::StatusCode::kInvalidArgument,
                  "a deterministic aggregation sums exactly, and quantized values are decoded in floating "
                  "point; use a discretized encoding, whose integers sum exactly");
  }
  return absl::OkStatus();
}

// A differentially private aggregation's fields: float sums and means, dense or sparse,
// plain or encoded; returns the intrinsic the accumulators run (a mean's sum).
absl::StatusOr<Intrinsic> PrivateIntrinsic(const LeafField& leaf, const FieldIntrinsic& choice) {
  const auto refuse = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("field '", leaf.path, "' (", leaf.type.ToString(), ", ",
                                                   IntrinsicName(choice.intrinsic),
                                                   ") in an aggregation with differential privacy: ", why));
  };
  if (!IsFloating(leaf.type.dtype)) {
    return refuse("clipping scales values, which integer fields cannot take; declare a floating-point dtype");
  }
  if (choice.report_counts) {
    return refuse("per-coordinate counts would publish which coordinates each client touched, un-noised; "
                  "ask for no counts");
  }
  if (!std::isfinite(choice.clip_norm) || choice.clip_norm < 0) {
    return refuse(absl::StrCat("its clip_norm must be finite and >= 0 (0: none), not ", choice.clip_norm));
  }
  switch (choice.intrinsic) {
    case Intrinsic::kFederatedSum:
    case Intrinsic::kSparseSum:
    case Intrinsic::kRowSparseSum:
      return choice.intrinsic;
    case Intrinsic::kFederatedMean:
      return Intrinsic::kFederatedSum;
    case Intrinsic::kSparseMean:
      return Intrinsic::kSparseSum;
    case Intrinsic::kRowSparseMean:
      return Intrinsic::kRowSparseSum;
    case Intrinsic::kSparseSumSparse:
      return refuse("its result lists only the coordinates some client touched, which noise cannot hide; use "
                    "sparse_sum, whose result covers every coordinate");
    default:
      return refuse("clipping bounds each client's share of a sum; a weighted mean, a maximum or a minimum is "
                    "not such a sum (use federated_mean, sparse_mean or row_sparse_mean: each client counts once)");
  }
}

// A secure aggregation's field: a dense sum or mean of discretized values, whose masked
// integers the nodes add modulo 2^bits without reading them.
absl::Status CheckSecureField(const LeafField& leaf, const FieldIntrinsic& choice) {
  const auto refuse = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("field '", leaf.path, "' (", leaf.type.ToString(), ", ",
                                                   IntrinsicName(choice.intrinsic),
                                                   ") in a secure aggregation: ", why));
  };
  if (choice.intrinsic != Intrinsic::kFederatedSum && choice.intrinsic != Intrinsic::kFederatedMean) {
    return refuse("clients mask dense integer vectors, and the nodes add them without reading them; declare "
                  "federated_sum or federated_mean (a sparse update's indices would show what it touched, "
                  "a weight or a maximum cannot be taken of masked values)");
  }
  if (!choice.value_encoding.discretized()) {
    return refuse("masks are added to integers modulo 2^b; declare the field DISCRETIZED (its bits are b, "
                  "its scale the value of one step)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<const ReductionSpec>> ReductionSpec::Create(
    ValueType type, std::vector<FieldIntrinsic> intrinsics, ReductionOptions options) {
  FEDAGG_RETURN_IF_ERROR(type.Validate());
  std::vector<LeafField> leaves = FlattenLeaves(type);
  if (leaves.size() != intrinsics.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("type ", type.ToString(), " has ", leaves.size(), " tensor fields but ",
                     intrinsics.size(), " intrinsics were given; name one per field"));
  }
  if (options.privacy.has_value()) FEDAGG_RETURN_IF_ERROR(options.privacy->Check());
  if (options.secure && options.privacy.has_value()) {
    return absl::InvalidArgumentError(
        "secure aggregation with differential privacy is not built yet (the nodes cannot check the norm of "
        "a masked update): declare one or the other");
  }
  std::shared_ptr<ReductionSpec> spec(new ReductionSpec());
  spec->options_ = options;
  std::vector<std::string> parts;
  for (size_t i = 0; i < leaves.size(); ++i) {
    const LeafField& leaf = leaves[i];
    FieldIntrinsic choice = intrinsics[i];
    FieldSpec field;
    field.path = leaf.path;
    field.type = leaf.type;
    field.declared_intrinsic = choice.intrinsic;
    if (options.privacy.has_value()) {
      FEDAGG_ASSIGN_OR_RETURN(choice.intrinsic, PrivateIntrinsic(leaf, choice));
      field.private_mean = choice.intrinsic != field.declared_intrinsic;
      field.clip_norm = choice.clip_norm;
      if (field.private_mean && options.privacy->expected_clients <= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "field '", leaf.path, "' is a mean in an aggregation with differential privacy, which divides the "
            "noised sum by the expected number of clients: declare expected_clients (> 0)"));
      }
    }
    if (options.secure) {
      FEDAGG_RETURN_IF_ERROR(CheckSecureField(leaf, choice));
      field.modulus_bits = choice.value_encoding.bits;
      if (!spec->fields_.empty() && spec->fields_.front().modulus_bits != field.modulus_bits) {
        return absl::InvalidArgumentError(absl::StrCat(
            "field '", leaf.path, "' is discretized to ", field.modulus_bits, " bits and field '",
            spec->fields_.front().path, "' to ", spec->fields_.front().modulus_bits,
            ": a secure aggregation masks every field modulo one 2^b; give them one bit width"));
      }
    }
    field.intrinsic = choice.intrinsic;
    field.encoding = EncodingOf(choice.intrinsic);
    FEDAGG_RETURN_IF_ERROR(CheckValueEncoding(leaf, choice.intrinsic, choice.value_encoding, options));
    field.value_encoding = choice.value_encoding;
    field.report_counts = choice.report_counts;
    field.keeps_counts = choice.report_counts || NeedsCoordinateCounts(choice.intrinsic);
    field.keeps_weight_sums = choice.intrinsic == Intrinsic::kSparseWeightedMean;
    if (choice.report_counts && !IsSparseFamily(choice.intrinsic)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "field '", leaf.path, "' uses ", IntrinsicName(choice.intrinsic),
          ", a dense intrinsic: every update touches every coordinate, so per-coordinate counts "
          "equal the contribution count; ask for counts only on sparse-family fields"));
    }
    switch (field.encoding) {
      case Encoding::kDense:
        field.rows = 1;
        field.row_width = leaf.type.num_elements();
        break;
      case Encoding::kSparse:
        field.rows = leaf.type.num_elements();
        field.row_width = 1;
        break;
      case Encoding::kRowSparse:
        if (leaf.type.shape.empty()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "field '", leaf.path, "' is a scalar (", leaf.type.ToString(), "); ",
              IntrinsicName(choice.intrinsic), " needs a tensor of rank >= 1 whose first dimension "
              "indexes rows"));
        }
        field.rows = leaf.type.shape[0];
        field.row_width = field.rows == 0 ? 0 : leaf.type.num_elements() / field.rows;
        break;
    }
    field.accumulation_dtype = AccumulationDType(leaf.type.dtype, choice.intrinsic, options);
    field.result_dtype = ResultDType(field.accumulation_dtype, choice.intrinsic);
    if (field.value_encoding.discretized()) {  // integers summed exactly, reported as values
      field.result_dtype = field.accumulation_dtype;
      field.accumulation_dtype = DType::kInt64;
    }
    field.exact_sum = options.deterministic && IsFloating(field.accumulation_dtype) &&
                      choice.intrinsic != Intrinsic::kFederatedMax &&
                      choice.intrinsic != Intrinsic::kFederatedMin;
    spec->has_weighted_field_ |= IsWeighted(choice.intrinsic);
    spec->has_float32_weighted_field_ |=
        IsWeighted(choice.intrinsic) && field.accumulation_dtype == DType::kFloat32;
    parts.push_back(absl::StrCat(leaf.path, ":", leaf.type.ToString(), ":",
                                 IntrinsicName(field.declared_intrinsic),
                                 field.clip_norm > 0 ? absl::StrFormat("/clip=%.17g", field.clip_norm) : "",
                                 choice.report_counts ? "+counts" : "",
                                 field.value_encoding.encoded() ? "@" : "",
                                 field.value_encoding.encoded() ? field.value_encoding.ToString() : "",
                                 field.value_encoding.rotated()
                                     ? absl::StrCat("#", field.value_encoding.rotation_seed)
                                     : ""));
    spec->fields_.push_back(std::move(field));
  }
  spec->canonical_ = absl::StrCat(
      type.ToString(), "|", absl::StrJoin(parts, ";"), "|finite=", options.require_finite ? 1 : 0,
      ",f64=", options.float64_accumulation ? 1 : 0, options.deterministic ? ",deterministic=1" : "",
      options.privacy.has_value() ? absl::StrCat(",", options.privacy->Canonical()) : "",
      options.secure ? ",secure=1" : "");
  spec->value_type_ = std::move(type);
  return std::shared_ptr<const ReductionSpec>(std::move(spec));
}

FieldSpec DecodedFieldSpec(const FieldSpec& field) {
  FieldSpec decoded = field;
  decoded.value_encoding = ValueEncoding{};
  decoded.type.dtype = field.accumulation_dtype;
  decoded.result_dtype = ResultDType(field.accumulation_dtype, field.intrinsic);
  return decoded;
}

uint64_t FixedStateBytes(const ReductionSpec& spec) {
  uint64_t bytes = 0;
  for (const FieldSpec& field : spec.fields()) bytes += FixedStateBytes(field);
  return bytes;
}

uint64_t FixedStateBytes(const FieldSpec& field) {
  if (field.intrinsic == Intrinsic::kSparseSumSparse) return 0;
  const uint64_t rows = field.encoding == Encoding::kDense ? 0 : static_cast<uint64_t>(field.rows);
  const uint64_t element = field.exact_sum ? ExactSums::BytesPerSum(ExactSums::GridFor(field.accumulation_dtype))
                                           : DTypeSize(field.accumulation_dtype);
  const uint64_t weight_sum = field.exact_sum ? ExactSums::BytesPerSum(ExactSums::Grid::kFloat64) : sizeof(double);
  return static_cast<uint64_t>(field.type.num_elements()) * element +
         (field.keeps_counts ? rows * sizeof(int64_t) : 0) + (field.keeps_weight_sums ? rows * weight_sum : 0);
}

}  // namespace fedagg
