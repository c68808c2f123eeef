// Property tests of the aggregation core on random specs and random updates:
//   1. PartialAggregate agrees with the float64 ReferenceReduce for every intrinsic/dtype;
//   2. any partition of the updates, accumulated in random batches, merged in a random tree
//      order (some partials through Serialize/Deserialize), reports what one flat
//      aggregation reports;
//   3. a batch with one corrupted update is refused whole and changes nothing.
//
// Seeds are fresh on every run (std::random_device) and printed with each failure; set
// FEDAGG_PROPERTY_SEED=<seed> to replay a run.
//
// Values come in two modes, picked per iteration:
//   exact:      floats are multiples of 1/4 in [-8, 8] and weights multiples of 1/8 in
//               (0, 10], so every float32 / float64 sum is exact and only a final division
//               rounds. Results must be within 4 units in the last place of the result
//               dtype of the reference (relative to max(1, |expected|)), and every
//               partition must give bit-identical results to the flat aggregation.
//   continuous: floats uniform in [-8, 8], weights uniform in [0.1, 10], and NaN / +-Inf
//               in max/min fields when the spec allows them. Floating results must be
//               within the worst-case summation bound  2 * eps * T^2 * A / D  (T terms
//               per coordinate, A = max |weight * value|, D = smallest divisor) of the
//               reference, and partitions within twice that of the flat aggregation.
// Integer fields (int32 / int64 sums, means, extremes) and all max/min fields must match
// exactly in both modes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "service/core/cpu_kernels.h"
#include "service/core/partial_aggregate.h"
#include "service/core/reference_reducer.h"
#include "service/core/thread_pool.h"
#include "tests/core/core_test_util.h"

namespace fedagg {
namespace {

using ::fedagg::testing::FromDouble;
using ::fedagg::testing::IsOk;
using ::fedagg::testing::kAllDTypes;
using ::fedagg::testing::kAllIntrinsics;
using ::fedagg::testing::SameTensor;
using ::fedagg::testing::Snapshot;
using ::fedagg::testing::TakeSnapshot;
using ::fedagg::testing::ToBytes;
using ::fedagg::testing::Unchanged;
using ::fedagg::testing::Update;
using ::fedagg::testing::ValueOrDie;
using ::fedagg::testing::Views;

// ---- Seeds ------------------------------------------------------------------------------

uint64_t MasterSeed() {
  if (const char* env = std::getenv("FEDAGG_PROPERTY_SEED"); env != nullptr && *env != '\0') {
    return std::strtoull(env, nullptr, 10);
  }
  std::random_device device;
  return (uint64_t{device()} << 32) | device();
}

std::string SeedTrace(uint64_t master, int iteration) {
  return absl::StrCat("master seed ", master, ", iteration ", iteration,
                      " (replay with FEDAGG_PROPERTY_SEED=", master, ")");
}

// ---- Random scenarios -------------------------------------------------------------------

// One field of one update, owned and copyable (so that tests can corrupt copies).
struct FieldData {
  Encoding encoding;
  DType dtype;
  std::vector<int64_t> indices;
  std::vector<std::byte> bytes;
};
struct UpdateData {
  std::vector<FieldData> fields;
  std::optional<double> weight;

  Update Build() const {
    Update u;
    for (const FieldData& f : fields) u.Raw(f.encoding, f.dtype, f.indices, f.bytes);
    if (weight.has_value()) u.Weight(*weight);
    return u;
  }
};

struct Scenario {
  std::shared_ptr<const ReductionSpec> spec;
  std::vector<UpdateData> data;
  bool exact = false;
  std::vector<Update> updates;  // built from data
  std::vector<UpdateView> views;

  void Build() {
    updates.clear();
    for (const UpdateData& d : data) updates.push_back(d.Build());
    views = Views(updates);
  }
};

class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}

  std::mt19937_64& rng() { return rng_; }
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool Chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  template <typename T>
  const T& Pick(const std::vector<T>& items) {
    return items[static_cast<size_t>(Uniform(0, static_cast<int>(items.size()) - 1))];
  }

  Scenario Make(int max_updates) {
    Scenario s;
    s.exact = Chance(0.5);
    ReductionOptions options;
    options.require_finite = Chance(0.4);
    options.float64_accumulation = Chance(0.3);
    std::vector<std::pair<std::string, ValueType>> fields;
    std::vector<FieldIntrinsic> intrinsics;
    const int num_fields = Uniform(1, 4);
    for (int f = 0; f < num_fields; ++f) {
      const Intrinsic intrinsic = Pick(std::vector<Intrinsic>(std::begin(kAllIntrinsics), std::end(kAllIntrinsics)));
      const DType dtype = Pick(std::vector<DType>(std::begin(kAllDTypes), std::end(kAllDTypes)));
      std::vector<int64_t> shape;
      if (EncodingOf(intrinsic) == Encoding::kRowSparse) {
        shape.push_back(Uniform(1, 12));
        for (int d = Uniform(0, 2); d > 0; --d) shape.push_back(Uniform(1, 3));
      } else {
        for (int d = Uniform(0, 3); d > 0; --d) shape.push_back(Uniform(1, 5));
      }
      if (Chance(0.03) && !shape.empty()) shape.back() = 0;  // an empty tensor now and then
      ValueType type = ValueType::Tensor(dtype, shape);
      // Some fields sit in a nested struct, to exercise depth-first flattening.
      if (Chance(0.3)) type = ValueType::Struct({{"inner", std::move(type)}});
      fields.emplace_back(absl::StrCat("f", f), std::move(type));
      intrinsics.push_back({intrinsic, IsSparseFamily(intrinsic) && Chance(0.5)});
    }
    s.spec = ValueOrDie(ReductionSpec::Create(ValueType::Struct(std::move(fields)), intrinsics, options));

    const int n = Uniform(1, max_updates);
    for (int u = 0; u < n; ++u) {
      UpdateData d;
      for (const FieldSpec& field : s.spec->fields()) d.fields.push_back(MakeField(*s.spec, field, s.exact));
      if (s.spec->has_weighted_field()) {
        d.weight = s.exact ? Uniform(1, 80) / 8.0 : std::uniform_real_distribution<double>(0.1, 10)(rng_);
      }
      s.data.push_back(std::move(d));
    }
    s.Build();
    return s;
  }

 private:
  double FloatValue(bool exact, bool special_allowed) {
    if (special_allowed && Chance(0.05)) {
      const int which = Uniform(0, 2);
      return which == 0 ? std::nan("") : which == 1 ? INFINITY : -INFINITY;
    }
    if (exact) return Uniform(-32, 32) / 4.0;
    return std::uniform_real_distribution<double>(-8, 8)(rng_);
  }

  FieldData MakeField(const ReductionSpec& spec, const FieldSpec& field, bool exact) {
    FieldData out{field.encoding, field.type.dtype, {}, {}};
    int64_t elements = field.type.num_elements();
    if (field.encoding != Encoding::kDense) {
      const int64_t max_entries = field.rows == 0 ? 0 : std::min<int64_t>(12, 2 * field.rows);
      const int64_t nnz = Uniform(0, static_cast<int>(max_entries));
      for (int64_t k = 0; k < nnz; ++k) out.indices.push_back(Uniform(0, static_cast<int>(field.rows) - 1));
      elements = nnz * field.row_width;
    }
    const bool extreme = field.intrinsic == Intrinsic::kFederatedMax || field.intrinsic == Intrinsic::kFederatedMin;
    const bool special = !exact && extreme && !spec.options().require_finite;
    const bool big_ints = Chance(0.5);
    cpu::DispatchDType(field.type.dtype, [&](auto tag) {
      using V = typename decltype(tag)::type;
      std::vector<V> values;
      for (int64_t i = 0; i < elements; ++i) {
        if constexpr (std::is_same_v<V, int32_t>) {
          values.push_back(Uniform(-1000, 1000));
        } else if constexpr (std::is_same_v<V, int64_t>) {
          // Up to 2^40: sums of a few hundred stay exact in the float64 reference too.
          const int64_t bound = big_ints ? int64_t{1} << 40 : 1000;
          values.push_back(std::uniform_int_distribution<int64_t>(-bound, bound)(rng_));
        } else {
          values.push_back(FromDouble<V>(FloatValue(exact, special)));
        }
      }
      out.bytes = ToBytes(values);
    });
    return out;
  }

  std::mt19937_64 rng_;
};

// ---- Comparisons ------------------------------------------------------------------------

bool IsExtreme(Intrinsic intrinsic) {
  return intrinsic == Intrinsic::kFederatedMax || intrinsic == Intrinsic::kFederatedMin;
}

// Fields whose results must be exact in any mode: integer accumulation and extremes.
bool AlwaysExact(const FieldSpec& field) {
  return field.accumulation_dtype == DType::kInt64 || IsExtreme(field.intrinsic);
}

double Epsilon(DType dtype) {
  return dtype == DType::kFloat64 ? std::numeric_limits<double>::epsilon()
                                  : static_cast<double>(std::numeric_limits<float>::epsilon());
}

// The tolerance of a floating field against the reference (see the file comment).
double Tolerance(const Scenario& s, size_t f) {
  const FieldSpec& field = s.spec->fields()[f];
  if (AlwaysExact(field)) return 0;
  const double eps = Epsilon(field.accumulation_dtype);
  const double result_eps = Epsilon(field.result_dtype);
  if (s.exact) return 4 * result_eps;
  const bool weighted = IsWeighted(field.intrinsic);
  double terms = 0, max_abs = 0, min_divisor = 1;
  for (size_t u = 0; u < s.views.size(); ++u) {
    const FieldValue& value = s.views[u].fields[f];
    terms += field.encoding == Encoding::kDense ? 1 : static_cast<double>(value.indices.size());
    const double w = weighted ? *s.views[u].weight : 1.0;
    if (weighted) min_divisor = std::min(min_divisor, w);
    const size_t n = value.values.size() / DTypeSize(value.dtype);
    cpu::DispatchDType(value.dtype, [&](auto tag) {
      using V = typename decltype(tag)::type;
      const V* v = reinterpret_cast<const V*>(value.values.data());
      for (size_t i = 0; i < n; ++i) max_abs = std::max(max_abs, std::abs(w * cpu::Widen<double>(v[i])));
    });
  }
  return 2 * eps * terms * terms * max_abs / min_divisor + 4 * result_eps;
}

// got vs the reference for field f.
::testing::AssertionResult MatchesReference(const Scenario& s, size_t f, const ReportedField& got,
                                            const ReferenceField& want) {
  const FieldSpec& field = s.spec->fields()[f];
  if (got.path != field.path) return ::testing::AssertionFailure() << "path " << got.path;
  if (got.intrinsic != field.intrinsic) return ::testing::AssertionFailure() << "intrinsic differs";
  if (got.value.dtype != field.result_dtype) {
    return ::testing::AssertionFailure() << "dtype " << DTypeName(got.value.dtype) << ", expected "
                                         << DTypeName(field.result_dtype);
  }
  const std::vector<int64_t> shape = field.intrinsic == Intrinsic::kSparseSumSparse
                                         ? std::vector<int64_t>{static_cast<int64_t>(want.indices.size())}
                                         : field.type.shape;
  if (got.value.shape != shape) return ::testing::AssertionFailure() << "shape differs";
  if (got.indices != want.indices) return ::testing::AssertionFailure() << "indices differ";
  if (field.report_counts ? got.counts != want.counts : !got.counts.empty()) {
    return ::testing::AssertionFailure() << "counts differ (" << got.counts.size() << " vs "
                                         << want.counts.size() << " entries)";
  }
  const size_t n = ::fedagg::testing::NumElements(got.value);
  if (n != want.values.size()) return ::testing::AssertionFailure() << n << " values, expected " << want.values.size();
  const double tolerance = Tolerance(s, f);
  for (size_t i = 0; i < n; ++i) {
    const double a = got.value.ValueAsDouble(i), e = want.values[i];
    if (std::isnan(a) || std::isnan(e)) {
      if (std::isnan(a) != std::isnan(e)) return ::testing::AssertionFailure() << "value " << i << ": " << a << " vs " << e;
      continue;
    }
    if (std::isinf(a) || std::isinf(e) || tolerance == 0) {
      if (a != e) return ::testing::AssertionFailure() << "value " << i << ": " << a << " vs exactly " << e;
      continue;
    }
    const double error = std::abs(a - e) / std::max(1.0, std::abs(e));
    if (!(error <= tolerance)) {
      return ::testing::AssertionFailure() << "value " << i << ": " << a << " vs " << e << ", relative error "
                                           << error << " > tolerance " << tolerance;
    }
  }
  return ::testing::AssertionSuccess();
}

// Two results of the same updates: identical where exactness is promised, else close.
::testing::AssertionResult SameResult(const Scenario& s, const AggregateResult& a, const AggregateResult& b) {
  if (a.contributions != b.contributions) return ::testing::AssertionFailure() << "contributions differ";
  if (s.exact ? a.weight_sum != b.weight_sum
              : std::abs(a.weight_sum - b.weight_sum) > 1e-12 * std::max(1.0, a.weight_sum)) {
    return ::testing::AssertionFailure() << "weight sums " << a.weight_sum << " vs " << b.weight_sum;
  }
  if (a.fields.size() != b.fields.size()) return ::testing::AssertionFailure() << "field counts differ";
  for (size_t f = 0; f < a.fields.size(); ++f) {
    const FieldSpec& field = s.spec->fields()[f];
    const ReportedField& x = a.fields[f];
    const ReportedField& y = b.fields[f];
    if (x.indices != y.indices || x.counts != y.counts) {
      return ::testing::AssertionFailure() << "field " << field.path << ": indices or counts differ";
    }
    if (s.exact || AlwaysExact(field)) {
      if (::testing::AssertionResult same = SameTensor(x.value, y.value); !same) {
        return ::testing::AssertionFailure() << "field " << field.path << ": " << same.message();
      }
      continue;
    }
    const double tolerance = 2 * Tolerance(s, f);
    for (size_t i = 0; i < ::fedagg::testing::NumElements(x.value); ++i) {
      const double p = x.value.ValueAsDouble(i), q = y.value.ValueAsDouble(i);
      if ((std::isnan(p) && std::isnan(q)) || p == q) continue;
      if (!(std::abs(p - q) / std::max(1.0, std::abs(q)) <= tolerance)) {
        return ::testing::AssertionFailure() << "field " << field.path << " value " << i << ": " << p << " vs " << q;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// Accumulates `views` into a new aggregate in random batches (single updates through
// Accumulate, longer runs through AccumulateBatch).
PartialAggregate AccumulateInRandomBatches(const Scenario& s, absl::Span<const UpdateView> views, Generator& gen,
                                           const AccumulatorFactory& pool) {
  PartialAggregate partial(s.spec, pool);
  size_t i = 0;
  while (i < views.size()) {
    const size_t k = std::min(views.size() - i, static_cast<size_t>(gen.Uniform(1, 7)));
    if (k == 1 && gen.Chance(0.5)) {
      EXPECT_TRUE(IsOk(partial.Accumulate(views[i])));
    } else {
      EXPECT_TRUE(IsOk(partial.AccumulateBatch(views.subspan(i, k))));
    }
    i += k;
  }
  return partial;
}

// The CPU backend over a pool of one, three or the default number of threads.
const AccumulatorFactory& SomePool(Generator& gen) {
  static const CpuAccumulatorFactory* one = new CpuAccumulatorFactory(*new ThreadPool(1));
  static const CpuAccumulatorFactory* three = new CpuAccumulatorFactory(*new ThreadPool(3));
  switch (gen.Uniform(0, 2)) {
    case 0: return *one;
    case 1: return *three;
    default: return CpuAccumulatorFactory::Default();
  }
}

// ---- 1. Against the reference -----------------------------------------------------------

TEST(PropertyTest, MatchesReferenceReduction) {
  const uint64_t master = MasterSeed();
  for (int iteration = 0; iteration < 300; ++iteration) {
    SCOPED_TRACE(SeedTrace(master, iteration));
    Generator gen(master + static_cast<uint64_t>(iteration));
    const Scenario s = gen.Make(/*max_updates=*/30);
    SCOPED_TRACE(absl::StrCat(s.exact ? "exact" : "continuous", " values, spec ", s.spec->canonical()));
    const PartialAggregate partial = AccumulateInRandomBatches(s, s.views, gen, SomePool(gen));
    ASSERT_EQ(partial.contributions(), static_cast<int64_t>(s.views.size()));
    const AggregateResult result = ValueOrDie(partial.Report());
    const std::vector<ReferenceField> expected = ReferenceReduce(*s.spec, s.views);
    ASSERT_EQ(result.fields.size(), expected.size());
    double weight_sum = 0;
    for (const UpdateView& v : s.views) weight_sum += v.weight.value_or(1.0);
    EXPECT_NEAR(result.weight_sum, weight_sum, 1e-12 * weight_sum);
    for (size_t f = 0; f < expected.size(); ++f) {
      EXPECT_TRUE(MatchesReference(s, f, result.fields[f], expected[f])) << "field " << s.spec->fields()[f].path;
    }
    if (HasFailure()) break;
  }
}

// ---- 2. Partition and merge invariance ------------------------------------------------

TEST(PropertyTest, AnyPartitionMergedInAnyOrderEqualsFlatAggregation) {
  const uint64_t master = MasterSeed();
  for (int iteration = 0; iteration < 300; ++iteration) {
    SCOPED_TRACE(SeedTrace(master, iteration));
    Generator gen(master ^ (0x9e3779b97f4a7c15ull + static_cast<uint64_t>(iteration)));
    const Scenario s = gen.Make(/*max_updates=*/30);
    SCOPED_TRACE(absl::StrCat(s.exact ? "exact" : "continuous", " values, spec ", s.spec->canonical()));

    PartialAggregate flat(s.spec);
    ASSERT_TRUE(IsOk(flat.AccumulateBatch(s.views)));
    const AggregateResult flat_result = ValueOrDie(flat.Report());

    // Random partition into 1..6 parts (some may be empty), each in random batches.
    const int parts = gen.Uniform(1, 6);
    std::vector<std::vector<UpdateView>> assigned(parts);
    for (const UpdateView& v : s.views) assigned[gen.Uniform(0, parts - 1)].push_back(v);
    std::vector<PartialAggregate> partials;
    for (const auto& part : assigned) partials.push_back(AccumulateInRandomBatches(s, part, gen, SomePool(gen)));

    // Merge in a random tree order; sometimes a partial travels as bytes first.
    auto maybe_through_bytes = [&](PartialAggregate& p) {
      if (!gen.Chance(0.4)) return;
      const std::string bytes = p.Serialize().value();
      PartialAggregate restored = ValueOrDie(PartialAggregate::Deserialize(s.spec, bytes, SomePool(gen)));
      EXPECT_EQ(restored.Serialize().value(), bytes);
      p = std::move(restored);
    };
    while (partials.size() > 1) {
      const size_t i = static_cast<size_t>(gen.Uniform(0, static_cast<int>(partials.size()) - 1));
      size_t j = static_cast<size_t>(gen.Uniform(0, static_cast<int>(partials.size()) - 2));
      if (j >= i) ++j;
      maybe_through_bytes(partials[i]);
      maybe_through_bytes(partials[j]);
      const Snapshot source_before = TakeSnapshot(partials[j]);
      ASSERT_TRUE(IsOk(partials[i].MergeWith(partials[j])));
      EXPECT_TRUE(Unchanged(partials[j], source_before));  // merging reads its source only
      partials.erase(partials.begin() + static_cast<std::ptrdiff_t>(j));
    }
    maybe_through_bytes(partials[0]);
    const PartialAggregate& merged = partials[0];
    ASSERT_EQ(merged.contributions(), flat.contributions());
    const AggregateResult merged_result = ValueOrDie(merged.Report());
    EXPECT_TRUE(SameResult(s, merged_result, flat_result));
    if (s.exact) {
      // Exact sums: the whole state is the same, byte for byte.
      EXPECT_EQ(merged.Serialize().value(), flat.Serialize().value());
    }
    const std::vector<ReferenceField> expected = ReferenceReduce(*s.spec, s.views);
    for (size_t f = 0; f < expected.size(); ++f) {
      EXPECT_TRUE(MatchesReference(s, f, merged_result.fields[f], expected[f])) << "field " << s.spec->fields()[f].path;
    }
    if (HasFailure()) break;
  }
}

// ---- 3. A corrupted update spoils the whole batch, and nothing else -----------------------

// Corrupts one update so that validation must refuse it; returns what was done, or "" when
// the chosen corruption does not apply to this spec (the caller tries another).
std::string Corrupt(const ReductionSpec& spec, UpdateData& d, Generator& gen) {
  const size_t f = static_cast<size_t>(gen.Uniform(0, static_cast<int>(d.fields.size()) - 1));
  const FieldSpec& field = spec.fields()[f];
  FieldData& value = d.fields[f];
  const size_t element = DTypeSize(field.type.dtype);
  switch (gen.Uniform(0, 9)) {
    case 0:
      d.fields.pop_back();
      return "dropped the last field";
    case 1:
      value.encoding = value.encoding == Encoding::kDense ? Encoding::kSparse : Encoding::kDense;
      return "changed the encoding";
    case 2:
      value.dtype = value.dtype == DType::kFloat32 ? DType::kInt32 : DType::kFloat32;
      return "changed the dtype label";
    case 3:
      if (field.encoding != Encoding::kDense) return "";
      value.bytes.resize(value.bytes.empty() ? element : value.bytes.size() - element);
      return "changed the dense size";
    case 4:
      if (field.encoding == Encoding::kDense || value.indices.empty()) return "";
      value.indices[static_cast<size_t>(gen.Uniform(0, static_cast<int>(value.indices.size()) - 1))] =
          gen.Chance(0.5) ? field.rows : -1 - gen.Uniform(0, 5);
      return "put an index out of range";
    case 5:
      if (field.encoding == Encoding::kDense || field.row_width == 0) return "";
      value.indices.push_back(0);
      return "added an index without a value";
    case 6:
      if (!spec.has_weighted_field()) return "";
      d.weight.reset();
      return "dropped the weight";
    case 7:
      if (spec.has_weighted_field()) {
        const int which = gen.Uniform(0, 3);
        d.weight = which == 0 ? 0.0 : which == 1 ? -1.0 : which == 2 ? std::nan("") : INFINITY;
        return "made the weight invalid";
      }
      d.weight = 1.0;
      return "added a weight";
    case 8: {
      if (!spec.options().require_finite || !IsFloating(field.type.dtype) || value.bytes.empty()) return "";
      const size_t at = static_cast<size_t>(gen.Uniform(0, static_cast<int>(value.bytes.size() / element) - 1));
      cpu::DispatchDType(field.type.dtype, [&](auto tag) {
        using V = typename decltype(tag)::type;
        const V bad = FromDouble<V>(gen.Chance(0.5) ? std::nan("") : -INFINITY);
        std::memcpy(value.bytes.data() + at * element, &bad, element);
      });
      return "wrote a NaN or Inf into a finite-only aggregation";
    }
    default:
      if (field.encoding == Encoding::kDense) return "";
      value.bytes.push_back(std::byte{0});  // a ragged value buffer
      return "made the values ragged";
  }
}

TEST(PropertyTest, CorruptedUpdateRefusesTheWholeBatch) {
  const uint64_t master = MasterSeed();
  for (int iteration = 0; iteration < 200; ++iteration) {
    SCOPED_TRACE(SeedTrace(master, iteration));
    Generator gen(master * 31 + static_cast<uint64_t>(iteration));
    Scenario s = gen.Make(/*max_updates=*/12);
    SCOPED_TRACE(absl::StrCat("spec ", s.spec->canonical()));
    // Some state first.
    PartialAggregate partial(s.spec);
    const size_t prefix = static_cast<size_t>(gen.Uniform(0, static_cast<int>(s.views.size()) - 1));
    ASSERT_TRUE(IsOk(partial.AccumulateBatch(absl::MakeConstSpan(s.views).subspan(0, prefix))));
    const Snapshot before = TakeSnapshot(partial);
    // Corrupt one of the rest.
    const size_t bad = prefix + static_cast<size_t>(gen.Uniform(0, static_cast<int>(s.views.size() - prefix) - 1));
    std::string what;
    while (what.empty()) what = Corrupt(*s.spec, s.data[bad], gen);
    SCOPED_TRACE(absl::StrCat("update ", bad, ": ", what));
    s.Build();
    const absl::Span<const UpdateView> rest = absl::MakeConstSpan(s.views).subspan(prefix);
    const absl::Status status = rest.size() == 1 && gen.Chance(0.5) ? partial.Accumulate(rest[0])
                                                                     : partial.AccumulateBatch(rest);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    if (rest.size() > 1) {
      EXPECT_TRUE(absl::StrContains(status.message(), absl::StrCat("update ", bad - prefix, " of the batch: ")))
          << status;
    }
    EXPECT_TRUE(Unchanged(partial, before));
    if (HasFailure()) break;
  }
}

}  // namespace
}  // namespace fedagg
