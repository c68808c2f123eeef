// Generated updates and the fault plan of the load generator.
#include "client_stub/loadgen/workload.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "service/core/half_float.h"
#include "service/core/status_macros.h"
#include "service/core/update_clipping.h"
#include "service/core/value_encoder.h"

namespace fedagg::loadgen {
namespace {

// Writes `n` values of `dtype` into `out`: floats in [0.5, 1.5) (for float16 and bfloat16
// one of 1, 1.125, ..., 1.875, exact in both), integers in 0..15.
void FillValues(DType dtype, int64_t n, std::mt19937_64& rng, std::vector<std::byte>& out) {
  out.resize(static_cast<size_t>(n) * DTypeSize(dtype));
  std::uniform_real_distribution<double> real(0.5, 1.5);
  std::uniform_int_distribution<int> small(0, 15);
  auto fill = [&](auto* data, auto make) {
    for (int64_t i = 0; i < n; ++i) data[i] = make();
  };
  switch (dtype) {
    case DType::kFloat32: fill(reinterpret_cast<float*>(out.data()), [&] { return static_cast<float>(real(rng)); }); break;
    case DType::kFloat64: fill(reinterpret_cast<double*>(out.data()), [&] { return real(rng); }); break;
    case DType::kInt32: fill(reinterpret_cast<int32_t*>(out.data()), [&] { return static_cast<int32_t>(small(rng)); }); break;
    case DType::kInt64: fill(reinterpret_cast<int64_t*>(out.data()), [&] { return static_cast<int64_t>(small(rng)); }); break;
    case DType::kFloat16:
      fill(reinterpret_cast<Float16*>(out.data()), [&] { return ToFloat16(1.0f + static_cast<float>(small(rng) % 8) / 8); });
      break;
    case DType::kBFloat16:
      fill(reinterpret_cast<BFloat16*>(out.data()), [&] { return ToBFloat16(1.0f + static_cast<float>(small(rng) % 8) / 8); });
      break;
  }
}

// `k` distinct indices in [0, n), sorted (Floyd's sampling).
std::vector<int64_t> SampleIndices(int64_t n, int64_t k, std::mt19937_64& rng) {
  std::unordered_set<int64_t> chosen;
  chosen.reserve(static_cast<size_t>(k));
  for (int64_t j = n - k; j < n; ++j) {
    const int64_t t = std::uniform_int_distribution<int64_t>(0, j)(rng);
    if (!chosen.insert(t).second) chosen.insert(j);
  }
  std::vector<int64_t> out(chosen.begin(), chosen.end());
  std::sort(out.begin(), out.end());
  return out;
}

bool PicksClient(double fraction, int64_t client) {
  return std::floor(static_cast<double>(client + 1) * fraction) > std::floor(static_cast<double>(client) * fraction);
}

}  // namespace

void ClipAsAClientWould(const ReductionSpec& spec, GeneratedUpdate& update) {
  const std::vector<FieldSpec>& fields = spec.fields();
  UpdateView plain;
  for (size_t f = 0; f < fields.size(); ++f) {
    plain.fields.push_back(FieldValue{fields[f].encoding, fields[f].type.dtype, absl::MakeConstSpan(update.indices_[f]),
                                      absl::MakeConstSpan(update.values_[f])});
  }
  const double factor = ClientClipFactor(spec, plain);
  if (factor >= 1) return;
  for (size_t f = 0; f < fields.size(); ++f) {
    ScaleFieldValues(PlainFieldSpec(fields[f], fields[f].type.dtype), plain.fields[f], absl::MakeSpan(update.values_[f]),
                     factor);
  }
}

absl::StatusOr<std::vector<GeneratedUpdate>> GenerateUpdates(const ReductionSpec& spec,
                                                             absl::Span<const double> densities, int count,
                                                             uint64_t seed) {
  const std::vector<FieldSpec>& fields = spec.fields();
  if (densities.size() != 1 && densities.size() != fields.size()) {
    return absl::InvalidArgumentError(absl::StrCat("give one density for every field or one for all: the type has ",
                                                   fields.size(), " fields, ", densities.size(), " densities were given"));
  }
  for (double d : densities) {
    if (!(d > 0 && d <= 1)) return absl::InvalidArgumentError(absl::StrCat("density ", d, " is not in (0, 1]"));
  }
  if (count < 1) return absl::InvalidArgumentError("generate at least one distinct update");
  std::vector<GeneratedUpdate> out(static_cast<size_t>(count));
  std::mt19937_64 rng(seed);
  for (GeneratedUpdate& update : out) {
    update.values_.resize(fields.size());
    update.indices_.resize(fields.size());
    for (size_t f = 0; f < fields.size(); ++f) {
      const FieldSpec& field = fields[f];
      const DType dtype = field.type.dtype;
      int64_t elements = field.type.num_elements();
      if (field.encoding != Encoding::kDense && field.rows > 0) {
        const double density = densities.size() == 1 ? densities[0] : densities[f];
        const int64_t k = std::clamp<int64_t>(std::llround(density * static_cast<double>(field.rows)), 1, field.rows);
        update.indices_[f] = SampleIndices(field.rows, k, rng);
        elements = k * field.row_width;
      } else if (field.encoding != Encoding::kDense) {
        elements = 0;  // a table without rows: nothing to touch
      }
      FillValues(dtype, elements, rng, update.values_[f]);
      update.model_bytes_ += static_cast<int64_t>(update.values_[f].size() + update.indices_[f].size() * sizeof(int64_t));
    }
    // With differential privacy, a discretized update must be clipped by its client, before
    // it is discretized: such a workload's clients clip every update. Others send theirs
    // as generated, and the node clips them.
    if (spec.options().privacy.has_value() &&
        std::any_of(fields.begin(), fields.end(), [](const FieldSpec& f) { return f.value_encoding.discretized(); })) {
      ClipAsAClientWould(spec, update);
    }
    for (size_t f = 0; f < fields.size(); ++f) {
      const FieldSpec& field = fields[f];
      const DType dtype = field.type.dtype;
      const int64_t elements = static_cast<int64_t>(update.values_[f].size() / DTypeSize(dtype));
      if (field.value_encoding.encoded()) {  // sent as encoded, rounded with the update's own stream
        std::vector<std::byte> encoded(field.value_encoding.EncodedBytes(elements));
        FEDAGG_RETURN_IF_ERROR(EncodeValues(field.value_encoding, dtype, update.values_[f],
                                            RoundingStream(rng(), f), absl::MakeSpan(encoded)));
        update.values_[f] = std::move(encoded);
      }
      update.view_.fields.push_back(FieldValue{field.encoding, dtype, absl::MakeConstSpan(update.indices_[f]),
                                               absl::MakeConstSpan(update.values_[f])});
      update.payload_bytes_ += static_cast<int64_t>(update.values_[f].size() + update.indices_[f].size() * sizeof(int64_t));
    }
    if (spec.has_weighted_field()) update.view_.weight = std::uniform_real_distribution<double>(1, 10)(rng);
  }
  return out;
}

FaultPlan::ClientFaults FaultPlan::For(int64_t client) const {
  ClientFaults faults{PicksClient(disconnect, client), PicksClient(lost_ack, client), PicksClient(slow, client)};
  if (PicksClient(leave_before_unmasking, client)) faults.leave = SecureDropout::kBeforeUnmasking;
  if (PicksClient(leave_before_input, client)) faults.leave = SecureDropout::kBeforeInput;
  if (PicksClient(leave_before_sharing, client)) faults.leave = SecureDropout::kBeforeSharing;
  return faults;
}

int64_t FaultPlan::Picked(double fraction, int64_t clients) {
  return static_cast<int64_t>(std::floor(static_cast<double>(clients) * fraction));
}

}  // namespace fedagg::loadgen
