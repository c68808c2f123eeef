// PartialAggregate: validation-first accumulation, merging, the binary format, reporting.
#include "service/core/partial_aggregate.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "service/core/byte_codec.h"
#include "service/core/decoding_field_accumulator.h"
#include "service/core/status_macros.h"
#include "service/core/update_validator.h"

namespace fedagg {
namespace {
constexpr char kMagic[4] = {'F', 'A', 'P', 'A'};
}  // namespace

PartialAggregate::PartialAggregate(std::shared_ptr<const ReductionSpec> spec,
                                   const AccumulatorFactory& backend)
    : spec_(std::move(spec)),
      backend_(&backend),
      exact_weight_sum_(ExactSums::Grid::kFloat64,
                        spec_->options().deterministic && spec_->has_weighted_field() ? 1 : 0) {
  for (const FieldSpec& field : spec_->fields()) fields_.push_back(MakeFieldAccumulator(field, *backend_));
}

absl::Status PartialAggregate::Accumulate(const UpdateView& update) {
  return AccumulateBatch(absl::MakeConstSpan(&update, 1));
}

absl::Status PartialAggregate::AccumulateBatch(absl::Span<const UpdateView> updates) {
  for (size_t i = 0; i < updates.size(); ++i) {
    if (absl::Status status = ValidateUpdate(*spec_, updates[i]); !status.ok()) {
      if (updates.size() == 1) return status;
      return absl::Status(status.code(),
                          absl::StrCat("update ", i, " of the batch: ", status.message()));
    }
  }
  return AccumulateValidatedBatch(updates);
}

absl::Status PartialAggregate::AccumulateValidatedBatch(absl::Span<const UpdateView> updates) {
  FEDAGG_RETURN_IF_ERROR(CheckNotReleased());
  if (updates.empty()) return absl::OkStatus();
  std::vector<double> weights(updates.size());
  for (size_t i = 0; i < updates.size(); ++i) weights[i] = updates[i].weight.value_or(1.0);
  std::vector<const FieldValue*> values(updates.size());
  for (size_t f = 0; f < fields_.size(); ++f) {
    for (size_t i = 0; i < updates.size(); ++i) values[i] = &updates[i].fields[f];
    FEDAGG_RETURN_IF_ERROR(fields_[f]->AccumulateBatch(values, weights));
  }
  contributions_ += static_cast<int64_t>(updates.size());
  for (const UpdateView& update : updates) clipped_updates_ += update.clipped ? 1 : 0;
  AddWeights(weights);
  return absl::OkStatus();
}

absl::Status PartialAggregate::AddUncounted(const UpdateView& correction) {
  FEDAGG_RETURN_IF_ERROR(CheckNotReleased());
  const double weight = 1.0;
  for (size_t f = 0; f < fields_.size(); ++f) {
    const FieldValue* value = &correction.fields[f];
    FEDAGG_RETURN_IF_ERROR(fields_[f]->AccumulateBatch({&value, 1}, {&weight, 1}));
  }
  return absl::OkStatus();
}

void PartialAggregate::AddWeights(absl::Span<const double> weights) {
  if (exact_weight_sum_.size() == 0) {
    for (double w : weights) weight_sum_ += w;
    return;
  }
  for (double w : weights) exact_weight_sum_.Add(0, w);
  weight_sum_ = exact_weight_sum_.Rounded(0);
}

uint32_t PartialAggregate::format_version() const {
  return spec_->options().deterministic ? kExactFormatVersion : kFormatVersion;
}

absl::Status PartialAggregate::MergeWith(const PartialAggregate& other) {
  FEDAGG_RETURN_IF_ERROR(CheckNotReleased());
  FEDAGG_RETURN_IF_ERROR(other.CheckNotReleased());
  if (other.spec_->canonical() != spec_->canonical()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot merge partial aggregates of different specs: ",
                     spec_->canonical(), " vs ", other.spec_->canonical()));
  }
  if (other.backend_->name() != backend_->name()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot merge a partial aggregate of the ", other.backend_->name(),
                     " backend into one of the ", backend_->name(),
                     " backend; deserialize it with the same backend"));
  }
  for (size_t f = 0; f < fields_.size(); ++f) {
    FEDAGG_RETURN_IF_ERROR(fields_[f]->MergeWith(*other.fields_[f]));
  }
  contributions_ += other.contributions_;
  clipped_updates_ += other.clipped_updates_;
  secure_cohorts_.insert(secure_cohorts_.end(), other.secure_cohorts_.begin(), other.secure_cohorts_.end());
  if (exact_weight_sum_.size() == 0) {
    weight_sum_ += other.weight_sum_;
  } else {
    exact_weight_sum_.AddSum(0, other.exact_weight_sum_, 0);
    weight_sum_ = exact_weight_sum_.Rounded(0);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> PartialAggregate::Serialize(PartialPrecision precision) const {
  FEDAGG_RETURN_IF_ERROR(CheckNotReleased());
  // A deterministic aggregation's exact sums are never narrowed, nor a differentially
  // private one's (the rounding would not be bounded by the clipping).
  const bool narrowed = precision != PartialPrecision::kFull && format_version() == kFormatVersion &&
                        !spec_->options().privacy.has_value();
  ByteWriter out;
  for (char c : kMagic) out.Put(c);
  out.Put<uint32_t>(narrowed ? kNarrowedFormatVersion : format_version());
  out.PutString(spec_->canonical());
  out.Put<int64_t>(contributions_);
  out.Put<double>(weight_sum_);
  if (format_version() == kExactFormatVersion) exact_weight_sum_.SerializeTo(out);
  if (spec_->options().privacy.has_value()) out.Put<int64_t>(clipped_updates_);
  if (spec_->options().secure) {
    out.Put<uint32_t>(static_cast<uint32_t>(secure_cohorts_.size()));
    for (const std::string& record : secure_cohorts_) out.PutString(record);
  }
  out.Put<uint32_t>(static_cast<uint32_t>(fields_.size()));
  for (size_t f = 0; f < fields_.size(); ++f) {
    out.Put<uint8_t>(static_cast<uint8_t>(spec_->fields()[f].intrinsic));
    out.Put<uint8_t>(static_cast<uint8_t>(spec_->fields()[f].accumulation_dtype));
    if (narrowed && Narrowable(spec_->fields()[f])) {
      FEDAGG_RETURN_IF_ERROR(WriteNarrowable(spec_->fields()[f], *fields_[f], precision, out));
    } else {
      FEDAGG_RETURN_IF_ERROR(fields_[f]->SerializeTo(out));
    }
  }
  return out.Take();
}

absl::StatusOr<PartialAggregate> PartialAggregate::Deserialize(
    std::shared_ptr<const ReductionSpec> spec, absl::string_view bytes,
    const AccumulatorFactory& backend) {
  ByteReader in(bytes);
  return Deserialize(std::move(spec), in, backend);
}

absl::StatusOr<PartialAggregate> PartialAggregate::Deserialize(
    std::shared_ptr<const ReductionSpec> spec, ByteReader& in, const AccumulatorFactory& backend) {
  char magic[4];
  for (char& c : magic) FEDAGG_RETURN_IF_ERROR(in.Get(&c));
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError("not a fedagg partial aggregate (bad magic bytes)");
  }
  uint32_t version = 0;
  FEDAGG_RETURN_IF_ERROR(in.Get(&version));
  if (version != kFormatVersion && version != kExactFormatVersion && version != kNarrowedFormatVersion) {
    return absl::DataLossError(absl::StrCat("partial aggregate format version ", version,
                                            " is not supported; this build reads versions ", kFormatVersion, ", ",
                                            kExactFormatVersion, " and ", kNarrowedFormatVersion));
  }
  std::string canonical;
  FEDAGG_RETURN_IF_ERROR(in.GetString(&canonical));
  if (canonical != spec->canonical()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "partial aggregate was built for spec ", canonical, ", expected ", spec->canonical()));
  }
  PartialAggregate partial(std::move(spec), backend);
  // Version 3 is version 1 with 16-bit sums: a partial of the same specs.
  const bool narrowed = version == kNarrowedFormatVersion;
  if ((narrowed ? kFormatVersion : version) != partial.format_version()) {
    return absl::DataLossError(absl::StrCat("partial aggregate has format version ", version,
                                            ", but its spec's partials are version ",
                                            partial.format_version()));
  }
  FEDAGG_RETURN_IF_ERROR(in.Get(&partial.contributions_));
  FEDAGG_RETURN_IF_ERROR(in.Get(&partial.weight_sum_));
  if (version == kExactFormatVersion) {
    FEDAGG_RETURN_IF_ERROR(partial.exact_weight_sum_.DeserializeFrom(in, "the weight sum"));
    if (partial.exact_weight_sum_.size() > 0 && partial.exact_weight_sum_.Rounded(0) != partial.weight_sum_) {
      return absl::DataLossError(absl::StrCat("partial aggregate's weight sum ", partial.weight_sum_,
                                              " is not its exact weight sum, rounded"));
    }
  }
  if (partial.spec_->options().privacy.has_value()) {
    FEDAGG_RETURN_IF_ERROR(in.Get(&partial.clipped_updates_));
    if (partial.clipped_updates_ < 0 || partial.clipped_updates_ > partial.contributions_) {
      return absl::DataLossError(absl::StrCat("partial aggregate counts ", partial.clipped_updates_,
                                              " clipped updates of ", partial.contributions_));
    }
  }
  if (partial.spec_->options().secure) {
    uint32_t cohorts = 0;
    FEDAGG_RETURN_IF_ERROR(in.Get(&cohorts));
    // Each cohort recorded holds at least one masked input.
    if (cohorts > static_cast<uint64_t>(std::max<int64_t>(partial.contributions_, 0))) {
      return absl::DataLossError(absl::StrCat("partial aggregate records ", cohorts, " secure cohorts for ",
                                              partial.contributions_, " contributions"));
    }
    partial.secure_cohorts_.resize(cohorts);
    for (std::string& record : partial.secure_cohorts_) FEDAGG_RETURN_IF_ERROR(in.GetString(&record));
  }
  // Unweighted updates weigh 1 each; weighted ones are > 0 each.
  const bool weighted = partial.spec_->has_weighted_field();
  if (partial.contributions_ < 0 || !std::isfinite(partial.weight_sum_) ||
      partial.weight_sum_ < 0 ||
      (!weighted && partial.weight_sum_ != static_cast<double>(partial.contributions_)) ||
      (weighted && (partial.weight_sum_ > 0) != (partial.contributions_ > 0))) {
    return absl::DataLossError(absl::StrCat("partial aggregate has invalid totals: ",
                                            partial.contributions_, " contributions, weight sum ",
                                            partial.weight_sum_));
  }
  uint32_t field_count = 0;
  FEDAGG_RETURN_IF_ERROR(in.Get(&field_count));
  if (field_count != partial.fields_.size()) {
    return absl::DataLossError(absl::StrCat("partial aggregate has ", field_count,
                                            " fields, spec has ", partial.fields_.size()));
  }
  for (size_t f = 0; f < partial.fields_.size(); ++f) {
    const FieldSpec& field = partial.spec_->fields()[f];
    uint8_t intrinsic = 0, accumulation = 0;
    FEDAGG_RETURN_IF_ERROR(in.Get(&intrinsic));
    FEDAGG_RETURN_IF_ERROR(in.Get(&accumulation));
    if (intrinsic != static_cast<uint8_t>(field.intrinsic) ||
        accumulation != static_cast<uint8_t>(field.accumulation_dtype)) {
      return absl::DataLossError(
          absl::StrCat("partial aggregate field ", f, " header does not match field '", field.path, "'"));
    }
    if (narrowed && Narrowable(field)) {
      FEDAGG_RETURN_IF_ERROR(ReadNarrowable(field, *partial.fields_[f], in, partial.contributions_));
    } else {
      FEDAGG_RETURN_IF_ERROR(partial.fields_[f]->DeserializeFrom(in, partial.contributions_));
    }
  }
  if (!in.AtEnd()) {
    return absl::DataLossError(absl::StrCat("partial aggregate has ", in.remaining(), " trailing bytes"));
  }
  return partial;
}

absl::StatusOr<AggregateResult> PartialAggregate::Report() const {
  FEDAGG_RETURN_IF_ERROR(CheckNotReleased());
  if (contributions_ == 0) {
    return absl::FailedPreconditionError("no contributions yet: there is nothing to report");
  }
  AggregateResult result;
  result.contributions = contributions_;
  result.weight_sum = weight_sum_;
  for (const auto& field : fields_) {
    FEDAGG_ASSIGN_OR_RETURN(ReportedField reported, field->Report(contributions_, weight_sum_));
    result.fields.push_back(std::move(reported));
  }
  return result;
}

void PartialAggregate::ReleaseAccumulators() {
  fields_.clear();
  fields_.shrink_to_fit();
  released_ = true;
}

absl::Status PartialAggregate::CheckNotReleased() const {
  if (!released_) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "this partial aggregate's accumulators were released when its aggregation finished; its result, "
      "status and last checkpoint remain");
}

uint64_t PartialAggregate::MemoryBytes() const {
  uint64_t bytes = 0;
  for (const auto& field : fields_) bytes += field->MemoryBytes();
  return bytes;
}

}  // namespace fedagg
