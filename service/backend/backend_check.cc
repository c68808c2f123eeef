// Random exact-arithmetic updates through a backend, against the reference and the CPU.
#include "service/backend/backend_check.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>

#include "absl/strings/str_cat.h"
#include "service/core/cpu_accumulator_factory.h"
#include "service/core/half_float.h"
#include "service/core/partial_aggregate.h"
#include "service/core/reference_reducer.h"
#include "service/core/status_macros.h"

namespace fedagg {
namespace {

constexpr int kUpdates = 21;
constexpr double kTolerance = 1e-6;
constexpr int64_t kMostRepeats = 3;  // times one index appears in one random update, at most

// Dense values and table rows longer than the run of 64 elements a CPU work item of the
// thrust-omp backend covers, and not a multiple of it (thrust_field_reducer.h).
std::vector<int64_t> ShapeFor(Encoding encoding) {
  switch (encoding) {
    case Encoding::kDense: return {5, 67};
    case Encoding::kSparse: return {300};
    case Encoding::kRowSparse: return {40, 67};
  }
  return {1};
}

absl::StatusOr<std::shared_ptr<const ReductionSpec>> SpecFor(const BackendCase& c) {
  return ReductionSpec::Create(ValueType::Tensor(c.dtype, ShapeFor(EncodingOf(c.intrinsic))),
                               {{c.intrinsic, IsSparseFamily(c.intrinsic)}});
}

void AppendValue(DType dtype, double x, std::vector<std::byte>& out) {
  auto put = [&out](const auto& v) {
    const size_t at = out.size();
    out.resize(at + sizeof(v));
    std::memcpy(out.data() + at, &v, sizeof(v));
  };
  switch (dtype) {
    case DType::kFloat32: put(static_cast<float>(x)); break;
    case DType::kFloat64: put(x); break;
    case DType::kInt32: put(static_cast<int32_t>(x)); break;
    case DType::kInt64: put(static_cast<int64_t>(x)); break;
    case DType::kFloat16: put(ToFloat16(static_cast<float>(x))); break;
    case DType::kBFloat16: put(ToBFloat16(static_cast<float>(x))); break;
  }
}

// One update that owns its memory; view() points into it.
struct OwnedUpdate {
  std::vector<int64_t> indices;
  std::vector<std::byte> bytes;
  UpdateView view;
};

std::vector<std::unique_ptr<OwnedUpdate>> RandomUpdates(const ReductionSpec& spec, std::mt19937_64& rng) {
  const FieldSpec& field = spec.fields()[0];
  std::uniform_int_distribution<int> quarter(-32, 32), integer(-1000, 1000), eighth(1, 80);
  auto value = [&]() {
    return IsInteger(field.type.dtype) ? static_cast<double>(integer(rng)) : quarter(rng) / 4.0;
  };
  std::vector<std::unique_ptr<OwnedUpdate>> updates;
  for (int u = 0; u < kUpdates; ++u) {
    auto update = std::make_unique<OwnedUpdate>();
    int64_t values = field.row_width;
    if (field.encoding != Encoding::kDense) {
      // Up to 30 coordinates (8 rows), repeats within one update included, each index at
      // most kMostRepeats times: a run of one index is never cut between staging slots,
      // and the smallest slots the suite stages through (3 KiB) must hold the longest run.
      const int64_t entries = std::uniform_int_distribution<int64_t>(
          0, field.encoding == Encoding::kSparse ? 30 : 8)(rng);
      std::uniform_int_distribution<int64_t> id(0, field.rows - 1);
      while (static_cast<int64_t>(update->indices.size()) < entries) {
        const int64_t index = id(rng);
        if (std::count(update->indices.begin(), update->indices.end(), index) < kMostRepeats) {
          update->indices.push_back(index);
        }
      }
      values = entries * field.row_width;
    }
    for (int64_t k = 0; k < values; ++k) AppendValue(field.type.dtype, value(), update->bytes);
    update->view.fields.push_back(FieldValue{field.encoding, field.type.dtype,
                                             absl::MakeConstSpan(update->indices),
                                             absl::MakeConstSpan(update->bytes)});
    if (spec.has_weighted_field()) update->view.weight = eighth(rng) / 8.0;
    updates.push_back(std::move(update));
  }
  return updates;
}

// One case's random updates and how they are cut into batches and split, from its seed.
struct CaseData {
  std::shared_ptr<const ReductionSpec> spec;
  std::vector<std::unique_ptr<OwnedUpdate>> updates;
  std::vector<UpdateView> views;
  std::vector<size_t> batch_sizes;
  size_t split = 0;
};

absl::StatusOr<CaseData> MakeCaseData(const BackendCase& test_case, uint64_t seed) {
  CaseData data;
  FEDAGG_ASSIGN_OR_RETURN(data.spec, SpecFor(test_case));
  std::mt19937_64 rng(seed);
  data.updates = RandomUpdates(*data.spec, rng);
  for (const auto& update : data.updates) data.views.push_back(update->view);
  for (size_t total = 0; total < data.views.size();) {
    data.batch_sizes.push_back(std::uniform_int_distribution<size_t>(1, 7)(rng));
    total += data.batch_sizes.back();
  }
  data.batch_sizes.resize(data.batch_sizes.size() + 2, 7);  // the split can cut a batch short
  data.split = std::uniform_int_distribution<size_t>(0, data.views.size())(rng);
  return data;
}

// The case's updates in two partial aggregates, in its batches; the second goes through
// the binary format and is merged into the first.
absl::StatusOr<PartialAggregate> Reduce(const CaseData& data, const AccumulatorFactory& backend) {
  PartialAggregate first(data.spec, backend), second(data.spec, backend);
  const std::vector<UpdateView>& views = data.views;
  size_t at = 0;
  for (size_t size : data.batch_sizes) {
    PartialAggregate& target = at < data.split ? first : second;
    const size_t n = std::min(size, (at < data.split ? data.split : views.size()) - at);
    FEDAGG_RETURN_IF_ERROR(target.AccumulateBatch(absl::MakeConstSpan(views).subspan(at, n)));
    at += n;
  }
  FEDAGG_ASSIGN_OR_RETURN(std::string bytes, second.Serialize());
  FEDAGG_ASSIGN_OR_RETURN(PartialAggregate restored, PartialAggregate::Deserialize(data.spec, bytes, backend));
  FEDAGG_RETURN_IF_ERROR(first.MergeWith(restored));
  return first;
}

// Bit for bit: a device backend makes its results from the same state by the same
// divisions in the same precision.
bool SameResult(const AggregateResult& a, const AggregateResult& b) {
  if (a.fields.size() != b.fields.size()) return false;
  for (size_t f = 0; f < a.fields.size(); ++f) {
    const ReportedField& x = a.fields[f];
    const ReportedField& y = b.fields[f];
    if (x.value.dtype != y.value.dtype || x.value.shape != y.value.shape || x.value.bytes != y.value.bytes ||
        x.indices != y.indices || x.counts != y.counts || x.has_counts != y.has_counts) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::vector<BackendCase> AllBackendCases() {
  constexpr DType kDTypes[] = {DType::kFloat32, DType::kFloat64, DType::kInt32,
                               DType::kInt64,   DType::kFloat16, DType::kBFloat16};
  std::vector<BackendCase> cases;
  for (uint8_t raw = 0; raw < 255; ++raw) {
    if (!IsValidIntrinsic(raw)) continue;
    for (DType dtype : kDTypes) {
      const BackendCase c{static_cast<Intrinsic>(raw), dtype};
      if (SpecFor(c).ok()) cases.push_back(c);
    }
  }
  return cases;
}

BackendCheckResult CheckBackend(const AccumulatorFactory& backend, const BackendCase& test_case,
                                uint64_t seed) {
  BackendCheckResult result;
  absl::StatusOr<CaseData> data = MakeCaseData(test_case, seed);
  if (!data.ok()) {
    result.detail = absl::StrCat("no such case: ", data.status().message());
    return result;
  }
  absl::StatusOr<PartialAggregate> tested = Reduce(*data, backend);
  absl::StatusOr<PartialAggregate> cpu = Reduce(*data, CpuAccumulatorFactory::Default());
  if (!tested.ok() || !cpu.ok()) {
    result.detail = absl::StrCat("reduction failed: ", (tested.ok() ? cpu : tested).status().ToString());
    return result;
  }
  absl::StatusOr<AggregateResult> report = tested->Report();
  absl::StatusOr<AggregateResult> cpu_report = cpu->Report();
  if (!report.ok() || !cpu_report.ok()) {
    result.detail = absl::StrCat("report failed: ", (report.ok() ? cpu_report : report).status().ToString());
    return result;
  }
  result.max_relative_error = MaxRelativeError(ReferenceReduce(*data->spec, data->views), *report);
  absl::StatusOr<std::string> tested_bytes = tested->Serialize();
  absl::StatusOr<std::string> cpu_bytes = cpu->Serialize();
  if (!tested_bytes.ok()) {
    result.detail = absl::StrCat("serialize failed: ", tested_bytes.status().ToString());
  } else if (!(result.max_relative_error <= kTolerance)) {
    result.detail = absl::StrCat("differs from the float64 reference by ", result.max_relative_error,
                                 " (relative; infinity: indices or counts differ)");
  } else if (!cpu_bytes.ok() || *tested_bytes != *cpu_bytes) {
    result.detail = "serialized state differs from the CPU backend's on the same batches";
  } else if (!SameResult(*report, *cpu_report)) {
    result.detail = "result differs from the CPU backend's on the same state (the final division or conversion)";
  }
  result.passed = result.detail.empty();
  return result;
}

absl::StatusOr<std::string> SerializedCase(const AccumulatorFactory& backend, const BackendCase& test_case,
                                           uint64_t seed) {
  FEDAGG_ASSIGN_OR_RETURN(const CaseData data, MakeCaseData(test_case, seed));
  FEDAGG_ASSIGN_OR_RETURN(const PartialAggregate reduced, Reduce(data, backend));
  return reduced.Serialize();
}

}  // namespace fedagg
