// Protobuf <-> core conversions for value types, specs and tensors.
#include "service/rounds/spec_conversion.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "service/core/status_macros.h"

namespace fedagg {
namespace {

constexpr int kMaxTypeDepth = 32;
constexpr size_t kMaxIdLength = 128;

absl::StatusOr<ValueType> FromProtoAtDepth(const v1::ValueType& proto, int depth) {
  if (depth > kMaxTypeDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("value type nests deeper than ", kMaxTypeDepth, " levels"));
  }
  switch (proto.kind_case()) {
    case v1::ValueType::kTensor: {
      FEDAGG_ASSIGN_OR_RETURN(DType dtype, DTypeFromProto(proto.tensor().dtype()));
      return ValueType::Tensor(dtype, {proto.tensor().shape().begin(), proto.tensor().shape().end()});
    }
    case v1::ValueType::kStructType: {
      std::vector<std::pair<std::string, ValueType>> fields;
      for (const auto& field : proto.struct_type().fields()) {
        FEDAGG_ASSIGN_OR_RETURN(ValueType type, FromProtoAtDepth(field.type(), depth + 1));
        fields.emplace_back(field.name(), std::move(type));
      }
      return ValueType::Struct(std::move(fields));
    }
    default:
      return absl::InvalidArgumentError("value type is empty: set tensor or struct_type");
  }
}

bool IsValidId(const std::string& id) {
  if (id.empty() || id.size() > kMaxIdLength) return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<DType> DTypeFromProto(v1::DType dtype) {
  const int raw = static_cast<int>(dtype);
  if (raw < 0 || raw > 255 || !IsValidDType(static_cast<uint8_t>(raw))) {
    return absl::InvalidArgumentError(absl::StrCat("dtype ", raw, " is not a known fedagg dtype"));
  }
  return static_cast<DType>(raw);
}

v1::DType DTypeToProto(DType dtype) { return static_cast<v1::DType>(static_cast<int>(dtype)); }

absl::StatusOr<ValueType> ValueTypeFromProto(const v1::ValueType& proto) {
  FEDAGG_ASSIGN_OR_RETURN(ValueType type, FromProtoAtDepth(proto, 0));
  FEDAGG_RETURN_IF_ERROR(type.Validate());
  return type;
}

v1::ValueType ValueTypeToProto(const ValueType& type) {
  v1::ValueType proto;
  if (type.is_tensor()) {
    proto.mutable_tensor()->set_dtype(DTypeToProto(type.tensor().dtype));
    for (int64_t d : type.tensor().shape) proto.mutable_tensor()->add_shape(d);
    return proto;
  }
  for (const StructField& field : type.fields()) {
    auto* f = proto.mutable_struct_type()->add_fields();
    f->set_name(field.name);
    *f->mutable_type() = ValueTypeToProto(*field.type);
  }
  return proto;
}

PrivacySpec PrivacySpecFromProto(const v1::DifferentialPrivacy& proto) {
  PrivacySpec privacy{proto.clip_norm(), proto.noise_multiplier(), proto.expected_clients(), std::nullopt};
  if (proto.has_adaptive()) {
    const v1::DifferentialPrivacy::Adaptive& adaptive = proto.adaptive();
    privacy.adaptive = AdaptiveClipping{adaptive.target_quantile(), adaptive.learning_rate(),
                                        adaptive.count_stddev() != 0 ? adaptive.count_stddev()
                                                                     : 0.05 * proto.expected_clients()};
  }
  return privacy;
}

v1::PrivacyReport PrivacyReportToProto(const PrivacyReport& report) {
  v1::PrivacyReport proto;
  proto.set_clip_norm(report.clip_norm);
  proto.set_noise_stddev(report.noise_stddev);
  proto.set_clipped_updates(report.clipped_updates);
  proto.set_unclipped_fraction(report.unclipped_fraction);
  proto.set_next_clip_norm(report.next_clip_norm);
  return proto;
}

absl::Status CheckSecureAggregation(const v1::SecureAggregation& secure) {
  const auto refuse = [](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("secure aggregation: ", why));
  };
  const SecureCohortOptions options = SecureCohortOptionsFromProto(secure);
  if (options.min_cohort < 2) return refuse("min_cohort must be >= 2 (0: 3): a cohort of one is its own sum");
  if (options.max_cohort < options.min_cohort || options.max_cohort > SecureCohortOptions::kMaxCohort) {
    return refuse(absl::StrCat("max_cohort (", options.max_cohort, ") must be in [min_cohort (", options.min_cohort,
                               "), ", SecureCohortOptions::kMaxCohort, "] (0: 1000)"));
  }
  if (secure.degree() != 0 && (secure.degree() < 2 || secure.degree() % 2 != 0)) {
    return refuse(absl::StrCat("degree ", secure.degree(), " must be even and >= 2 (0: chosen)"));
  }
  if (secure.threshold() != 0) {
    if (secure.degree() == 0) return refuse("a threshold needs its degree: declare both, or neither");
    if (secure.threshold() > secure.degree() || 2 * secure.threshold() <= secure.degree()) {
      return refuse(absl::StrCat("threshold ", secure.threshold(), " must be in (degree / 2, degree] = (",
                                 secure.degree() / 2, ", ", secure.degree(),
                                 "]: more than half the neighbours, so that no two disjoint halves "
                                 "can each recover a secret"));
    }
    if (options.min_cohort <= static_cast<int>(secure.threshold())) {
      return refuse(absl::StrCat("min_cohort (", options.min_cohort, ") must exceed the threshold (",
                                 secure.threshold(), "): a smaller cohort gives its clients fewer neighbours"));
    }
  }
  if (options.threat.has_value()) {
    if (secure.degree() != 0 || secure.threshold() != 0) {
      return refuse("with adversarial_rate or dropout_rate the degree and threshold are derived: leave them 0");
    }
    // Every cohort size can be had: the smallest and the largest must have a graph (a
    // cohort between them that has none fails when it forms, before anything is shared).
    for (int clients : {options.min_cohort, options.max_cohort}) {
      absl::StatusOr<CohortGraphParameters> graph = options.GraphFor(clients);
      if (!graph.ok()) return refuse(absl::StrCat("a cohort of ", clients, ": ", graph.status().message()));
    }
  }
  if (secure.root_public_key().size() != 0 && secure.root_public_key().size() != 32) {
    return refuse("root_public_key is the root's X25519 key of 32 bytes, set by the root (leave it empty)");
  }
  return absl::OkStatus();
}

SecureCohortOptions SecureCohortOptionsFromProto(const v1::SecureAggregation& proto) {
  SecureCohortOptions options;
  if (proto.min_cohort() != 0) options.min_cohort = static_cast<int>(std::min<uint32_t>(proto.min_cohort(), 1u << 30));
  if (proto.max_cohort() != 0) options.max_cohort = static_cast<int>(std::min<uint32_t>(proto.max_cohort(), 1u << 30));
  options.degree = static_cast<int>(std::min<uint32_t>(proto.degree(), 1u << 30));
  options.threshold = static_cast<int>(std::min<uint32_t>(proto.threshold(), 1u << 30));
  if (proto.stage_timeout_ms() != 0) options.stage_timeout = absl::Milliseconds(proto.stage_timeout_ms());
  if (proto.has_adversarial_rate() || proto.has_dropout_rate()) {
    options.threat = SecureCohortOptions::ThreatModel{proto.adversarial_rate(), proto.dropout_rate()};
  }
  return options;
}

absl::StatusOr<CohortGraphParameters> SecureCohortOptions::GraphFor(int clients) const {
  if (threat.has_value()) return GraphParametersFor(clients, threat->adversarial_rate, threat->dropout_rate);
  const int chosen_degree = degree == 0 ? kDefaultDegree : degree;
  return CohortGraphParameters{chosen_degree,
                               threshold != 0 ? threshold : std::min(chosen_degree, clients - 1) / 2 + 1};
}

absl::StatusOr<AggregationConfig> ConfigFromProto(const v1::AggregationSpec& proto) {
  AggregationConfig config;
  config.id = proto.aggregation_id();
  if (!IsValidId(config.id)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "aggregation id '", config.id, "' is invalid: use 1 to ", kMaxIdLength,
        " characters from A-Z a-z 0-9 . _ -"));
  }
  FEDAGG_ASSIGN_OR_RETURN(ValueType type, ValueTypeFromProto(proto.value_type()));
  std::vector<FieldIntrinsic> intrinsics;
  for (const v1::FieldIntrinsic& field : proto.intrinsics()) {
    const int raw = static_cast<int>(field.intrinsic());
    if (raw < 0 || raw > 255 || !IsValidIntrinsic(static_cast<uint8_t>(raw))) {
      return absl::InvalidArgumentError(absl::StrCat("intrinsic ", raw, " is not a known intrinsic"));
    }
    FEDAGG_ASSIGN_OR_RETURN(ValueEncoding encoding, ValueEncodingFromProto(field.encoding()));
    intrinsics.push_back(FieldIntrinsic{static_cast<Intrinsic>(raw), field.report_counts(), encoding, field.clip_norm()});
  }
  ReductionOptions options{proto.require_finite(), proto.float64_accumulation(), proto.deterministic()};
  if (proto.has_privacy()) options.privacy = PrivacySpecFromProto(proto.privacy());
  options.secure = proto.has_secure();
  if (options.secure) FEDAGG_RETURN_IF_ERROR(CheckSecureAggregation(proto.secure()));
  FEDAGG_ASSIGN_OR_RETURN(config.reduction, ReductionSpec::Create(std::move(type), std::move(intrinsics), options));
  if (proto.min_contributions() < 0 || proto.max_contributions() < 0) {
    return absl::InvalidArgumentError("min_contributions and max_contributions must be >= 0");
  }
  if (proto.max_contributions() != 0 && proto.max_contributions() < proto.min_contributions()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_contributions (", proto.max_contributions(), ") is below min_contributions (",
        proto.min_contributions(), ")"));
  }
  config.min_contributions = proto.min_contributions();
  config.max_contributions = proto.max_contributions();
  if (proto.deadline_unix_ms() < 0) {
    return absl::InvalidArgumentError("deadline_unix_ms must be >= 0 (0: no deadline)");
  }
  if (proto.deadline_unix_ms() > 0) config.deadline = absl::FromUnixMillis(proto.deadline_unix_ms());
  for (int i = 0; i < proto.broadcast_size(); ++i) {
    const v1::Tensor& tensor = proto.broadcast(i);
    FEDAGG_ASSIGN_OR_RETURN(DType dtype, DTypeFromProto(tensor.dtype()));
    TensorType type{dtype, {tensor.shape().begin(), tensor.shape().end()}};
    FEDAGG_RETURN_IF_ERROR(ValueType::Tensor(dtype, type.shape).Validate());
    if (tensor.data().size() != type.num_bytes()) {
      return absl::InvalidArgumentError(absl::StrCat("broadcast tensor ", i, " of type ",
                                                     type.ToString(), " needs ", type.num_bytes(),
                                                     " bytes, has ", tensor.data().size()));
    }
  }
  config.proto = proto;
  return config;
}

absl::StatusOr<ValueEncoding> ValueEncodingFromProto(const v1::FieldEncoding& proto) {
  ValueEncoding encoding;
  switch (proto.kind()) {
    case v1::FieldEncoding::PLAIN: return encoding;
    case v1::FieldEncoding::QUANTIZED:
      encoding = ValueEncoding::Quantized(static_cast<int>(std::min<uint32_t>(proto.bits(), 64)),
                                          proto.block_size() == 0 ? ValueEncoding::kDefaultBlockSize
                                                                  : static_cast<int64_t>(proto.block_size()),
                                          static_cast<int64_t>(proto.rotation()), proto.rotation_seed());
      break;
    case v1::FieldEncoding::DISCRETIZED:
      encoding = ValueEncoding::Discretized(static_cast<int>(std::min<uint32_t>(proto.bits(), 64)), proto.scale());
      encoding.rotation = static_cast<int64_t>(proto.rotation());  // refused by Check
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("field encoding kind ", static_cast<int>(proto.kind()), " is not a known encoding"));
  }
  FEDAGG_RETURN_IF_ERROR(encoding.Check());
  return encoding;
}

v1::FieldEncoding ValueEncodingToProto(const ValueEncoding& encoding) {
  v1::FieldEncoding proto;
  switch (encoding.coding) {
    case ValueCoding::kPlain: break;
    case ValueCoding::kQuantized:
      proto.set_kind(v1::FieldEncoding::QUANTIZED);
      proto.set_bits(static_cast<uint32_t>(encoding.bits));
      proto.set_block_size(static_cast<uint32_t>(encoding.block_size));
      proto.set_rotation(static_cast<uint32_t>(encoding.rotation));
      proto.set_rotation_seed(encoding.rotation_seed);
      break;
    case ValueCoding::kDiscretized:
      proto.set_kind(v1::FieldEncoding::DISCRETIZED);
      proto.set_bits(static_cast<uint32_t>(encoding.bits));
      proto.set_scale(encoding.scale);
      break;
  }
  return proto;
}

absl::Status ApplyEncodingToLinearFields(absl::string_view encoding, std::vector<v1::FieldIntrinsic>& fields) {
  if (encoding.empty()) return absl::OkStatus();
  FEDAGG_ASSIGN_OR_RETURN(const ValueEncoding parsed, ParseValueEncoding(encoding));
  if (!parsed.encoded()) return absl::OkStatus();
  for (v1::FieldIntrinsic& field : fields) {
    const bool linear = field.intrinsic() != v1::FEDERATED_MAX && field.intrinsic() != v1::FEDERATED_MIN;
    if (linear && !field.has_encoding()) *field.mutable_encoding() = ValueEncodingToProto(parsed);
  }
  return absl::OkStatus();
}

void AssignRotationSeeds(v1::AggregationSpec& spec, absl::FunctionRef<uint64_t()> next_seed) {
  for (v1::FieldIntrinsic& field : *spec.mutable_intrinsics()) {
    v1::FieldEncoding& encoding = *field.mutable_encoding();
    if (encoding.kind() == v1::FieldEncoding::QUANTIZED && encoding.rotation() != 0 && encoding.rotation_seed() == 0) {
      uint64_t seed = 0;
      while (seed == 0) seed = next_seed();
      encoding.set_rotation_seed(seed);
    }
  }
}

v1::Tensor TensorToProto(const Tensor& tensor) {
  v1::Tensor proto;
  proto.set_dtype(DTypeToProto(tensor.dtype));
  for (int64_t d : tensor.shape) proto.add_shape(d);
  proto.set_data(reinterpret_cast<const char*>(tensor.bytes.data()), tensor.bytes.size());
  return proto;
}

absl::StatusOr<std::vector<v1::FieldIntrinsic>> ParseIntrinsicList(absl::string_view list) {
  std::vector<v1::FieldIntrinsic> out;
  for (absl::string_view name : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    ValueEncoding encoding;
    if (const size_t at = name.find('@'); at != absl::string_view::npos) {
      FEDAGG_ASSIGN_OR_RETURN(encoding, ParseValueEncoding(name.substr(at + 1)));
      name = name.substr(0, at);
    }
    std::vector<absl::string_view> parts = absl::StrSplit(name, '+');
    FEDAGG_ASSIGN_OR_RETURN(Intrinsic intrinsic, ParseIntrinsic(parts[0]));
    v1::FieldIntrinsic& field = out.emplace_back();
    field.set_intrinsic(static_cast<v1::Intrinsic>(static_cast<int>(intrinsic)));
    for (size_t m = 1; m < parts.size(); ++m) {
      double clip = 0;
      if (parts[m] == "counts") {
        field.set_report_counts(true);
      } else if (absl::StartsWith(parts[m], "clip=") && absl::SimpleAtod(parts[m].substr(5), &clip) &&
                 std::isfinite(clip) && clip > 0) {
        field.set_clip_norm(clip);
      } else {
        return absl::InvalidArgumentError(absl::StrCat("'", parts[m], "' in '", name,
                                                       "' is not a field modifier: +counts, or +clip=C with C > 0"));
      }
    }
    if (encoding.encoded()) *field.mutable_encoding() = ValueEncodingToProto(encoding);
  }
  return out;
}

absl::StatusOr<std::optional<v1::SecureAggregation>> ParseSecureAggregation(absl::string_view text) {
  if (text.empty() || text == "none") return std::nullopt;
  v1::SecureAggregation secure;
  if (text == "on") return secure;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    const std::pair<absl::string_view, absl::string_view> pair = absl::StrSplit(item, absl::MaxSplits('=', 1));
    if (pair.first == "adversarial" || pair.first == "dropout") {
      double rate = 0;
      if (!absl::SimpleAtod(pair.second, &rate)) {
        return absl::InvalidArgumentError(absl::StrCat("secure: '", item, "' is not NAME=RATE"));
      }
      pair.first == "adversarial" ? secure.set_adversarial_rate(rate) : secure.set_dropout_rate(rate);
      continue;
    }
    uint32_t value = 0;
    if (!absl::SimpleAtoi(pair.second, &value)) {
      return absl::InvalidArgumentError(absl::StrCat("secure: '", item, "' is not NAME=COUNT"));
    }
    if (pair.first == "cohort") {
      secure.set_max_cohort(value);
    } else if (pair.first == "min") {
      secure.set_min_cohort(value);
    } else if (pair.first == "degree") {
      secure.set_degree(value);
    } else if (pair.first == "threshold") {
      secure.set_threshold(value);
    } else if (pair.first == "timeout_ms") {
      secure.set_stage_timeout_ms(value);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("secure: unknown parameter '", pair.first,
                       "'; use cohort, min, degree, threshold, timeout_ms, adversarial, dropout"));
    }
  }
  return secure;
}

absl::StatusOr<std::optional<v1::DifferentialPrivacy>> ParsePrivacy(absl::string_view text) {
  if (text.empty() || text == "none") return std::nullopt;
  v1::DifferentialPrivacy privacy;
  bool adaptive = false;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    const std::pair<absl::string_view, absl::string_view> pair = absl::StrSplit(item, absl::MaxSplits('=', 1));
    double value = 0;
    if (!absl::SimpleAtod(pair.second, &value)) {
      return absl::InvalidArgumentError(absl::StrCat("privacy: '", item, "' is not NAME=NUMBER"));
    }
    if (pair.first == "clip") {
      privacy.set_clip_norm(value);
    } else if (pair.first == "z") {
      privacy.set_noise_multiplier(value);
    } else if (pair.first == "clients") {
      privacy.set_expected_clients(value);
    } else if (pair.first == "quantile") {
      privacy.mutable_adaptive()->set_target_quantile(value);
      adaptive = true;
    } else if (pair.first == "lr") {
      privacy.mutable_adaptive()->set_learning_rate(value);
    } else if (pair.first == "count_stddev") {
      privacy.mutable_adaptive()->set_count_stddev(value);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "privacy: unknown parameter '", pair.first, "'; use clip, z, clients, quantile, lr, count_stddev"));
    }
  }
  if (privacy.has_adaptive() && !adaptive) {
    return absl::InvalidArgumentError("privacy: lr and count_stddev belong to adaptive clipping: give its quantile");
  }
  if (adaptive && privacy.adaptive().learning_rate() == 0) privacy.mutable_adaptive()->set_learning_rate(0.2);
  return privacy;
}

PrivacyReport PrivacyReportFromProto(const v1::PrivacyReport& proto) {
  return PrivacyReport{proto.clip_norm(), proto.noise_stddev(), proto.clipped_updates(), proto.unclipped_fraction(),
                       proto.next_clip_norm()};
}

}  // namespace fedagg
