// Micro-benchmarks of the CPU backend's reductions, each next to a memory-bandwidth
// baseline over the same bytes, so the ratio to the machine's limit is printed at the end;
// the sparse family is also set beside a scatter baseline (the fastest plain scatter of
// the same COO batch into a dense table). Beside them, the checksum every received update
// pays (BM_Crc32cReceive) and the validation of a sparse one (BM_ValidateSparseUpdate), on
// one thread, as the receive path runs them. Where Thrust's
// OpenMP system is built, the thrust-omp backend's rows (BM_ThrustOmp*) run the same
// batches through the staged path the cuda backend runs (staging ring, CPU copy engine,
// the portable reduction), to set beside the CPU backend's rows of the same name.
// Every benchmark first checks one batch against the reference reduction and fails
// (SkipWithError) if the result is wrong. BM_DenseSumQuantized sums updates sent quantized
// (1-8 bits a coordinate), its rate in the model's float32 bytes.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "service/core/cpu_kernels.h"
#include "service/core/crc32c.h"
#include "service/core/large_allocation.h"
#include "service/core/partial_aggregate.h"
#include "service/core/reference_reducer.h"
#include "service/core/privacy_noise.h"
#include "service/core/thread_pool.h"
#include "service/core/update_clipping.h"
#include "service/core/update_validator.h"
#include "service/core/value_encoder.h"
#if defined(FEDAGG_BENCH_THRUST_OMP)
#include "portable/omp_backend.h"
#endif

namespace fedagg {
namespace {

constexpr int64_t kDenseElements = int64_t{1} << 22;  // 16 MiB of float32 per update
// Sparse family: 1% density of a 16M-coordinate tensor per update.
constexpr int64_t kSparseCoordinates = int64_t{1} << 24;
constexpr int64_t kSparseNnz = kSparseCoordinates / 100;

struct Batch {
  std::vector<std::vector<float>> values;
  std::vector<std::vector<int64_t>> indices;
  std::vector<UpdateView> views;
};

// B updates of `nnz` entries (rows of `width` floats for row-sparse; all elements for dense).
Batch MakeBatch(Encoding encoding, int64_t rows, int64_t width, int64_t nnz, bool weighted,
                int kBatch = 8, uint64_t seed = 42) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> value(-1, 1);
  std::uniform_int_distribution<int64_t> index(0, rows - 1);
  Batch batch;
  batch.values.resize(kBatch);
  batch.indices.resize(kBatch);
  for (int b = 0; b < kBatch; ++b) {
    const int64_t count = encoding == Encoding::kDense ? rows * width : nnz * width;
    batch.values[b].resize(count);
    for (float& x : batch.values[b]) x = value(rng);
    if (encoding != Encoding::kDense) {
      for (int64_t k = 0; k < nnz; ++k) batch.indices[b].push_back(index(rng));
    }
    FieldValue field{encoding, DType::kFloat32, batch.indices[b],
                     AsBytes(absl::MakeConstSpan(batch.values[b]))};
    batch.views.push_back(UpdateView{{field}, weighted ? std::optional<double>(1.5 + b) : std::nullopt});
  }
  return batch;
}

// An update's indices as clients send them: distinct and increasing (sorted, each repeat
// moved up past the one before it, then down where that ran past the last row; at 1%
// density a repeat is rare). In place: the batch's views keep pointing at them.
void MakeDistinctAscending(std::vector<int64_t>& ids, int64_t rows) {
  std::sort(ids.begin(), ids.end());
  for (size_t i = 1; i < ids.size(); ++i) ids[i] = std::max(ids[i], ids[i - 1] + 1);
  for (size_t i = ids.size(); i-- > 0;) {
    ids[i] = std::min(ids[i], i + 1 < ids.size() ? ids[i + 1] - 1 : rows - 1);
  }
}

int64_t PayloadBytes(const Batch& batch) {
  int64_t bytes = 0;
  for (const auto& v : batch.values) bytes += static_cast<int64_t>(v.size() * sizeof(float));
  for (const auto& i : batch.indices) bytes += static_cast<int64_t>(i.size() * sizeof(int64_t));
  return bytes;
}

// The fold of words [begin, end), vectorised for AVX2 where the CPU has it, as the dense
// kernels are: on a machine whose cache holds the batch, a baseline built for SSE2 only
// ran at half the dense sum's speed and was no limit at all.
FEDAGG_VECTOR_CLONES uint32_t FoldWords(const uint32_t* words, int64_t begin, int64_t end) {
  uint32_t fold = 0;
  for (int64_t j = begin; j < end; ++j) fold += words[j];
  return fold;
}

// Reads every byte of a batch of state.range(0) dense updates once on the same threads
// the reduction uses, folding it with 32-bit integer additions (associative, so the
// compiler vectorises the loop): the fastest any reduction of these bytes can go on this
// machine. One per batch size the dense rows use: a batch of 8 (128 MiB) fits a large L3
// cache that a batch of 16 does not, so each row is set beside the baseline of its own
// batch size (docs/BENCHMARKS.md, the summary's DenseSum/16).
void BM_BandwidthBaseline(benchmark::State& state) {
  const Batch batch = MakeBatch(Encoding::kDense, 1, kDenseElements, 0, false, static_cast<int>(state.range(0)));
  ThreadPool& pool = ThreadPool::Default();
  std::vector<uint32_t> folds(static_cast<size_t>(pool.threads()) * 16);
  for (auto _ : state) {
    pool.ParallelFor(kDenseElements, 1 << 15, [&](int64_t begin, int64_t end) {
      uint32_t fold = 0;
      for (const auto& v : batch.values) {
        fold += FoldWords(reinterpret_cast<const uint32_t*>(v.data()), begin, end);
      }
      folds[static_cast<size_t>(begin * pool.threads() / kDenseElements) * 16] = fold;
    });
    benchmark::DoNotOptimize(folds.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * PayloadBytes(batch));
}

// The fastest the COO sparse family's scatter can go here: every value of a batch of
// state.range(0) updates of the sparse shape (1% of 16M coordinates, random int64
// indices) added into a 64 MiB float table at its index, and nothing else: no validation,
// no counts, no order. The threads of the reduction split each update's entries. Two
// threads may meet at a coordinate, so the table is accessed with relaxed atomic loads and
// stores (plain moves; a colliding add may be lost, and the table is never read back).
// With `sorted`, each update's indices are sorted first (outside the timing).
void RunScatterBaseline(benchmark::State& state, bool sorted) {
  const int kBatch = static_cast<int>(state.range(0));
  Batch batch = MakeBatch(Encoding::kSparse, kSparseCoordinates, 1, kSparseNnz, false, kBatch);
  if (sorted) {
    for (std::vector<int64_t>& ids : batch.indices) std::sort(ids.begin(), ids.end());
  }
  std::vector<float> table(static_cast<size_t>(kSparseCoordinates));
  ThreadPool& pool = ThreadPool::Default();
  for (auto _ : state) {
    pool.ParallelFor(kSparseNnz, 1 << 14, [&](int64_t begin, int64_t end) {
      for (int b = 0; b < kBatch; ++b) {
        const int64_t* ids = batch.indices[static_cast<size_t>(b)].data();
        const float* values = batch.values[static_cast<size_t>(b)].data();
        for (int64_t k = begin; k < end; ++k) {
          std::atomic_ref<float> slot(table[static_cast<size_t>(ids[k])]);
          slot.store(slot.load(std::memory_order_relaxed) + values[k], std::memory_order_relaxed);
        }
      }
    });
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * PayloadBytes(batch));
}
void BM_ScatterBaseline(benchmark::State& s) { RunScatterBaseline(s, false); }
void BM_ScatterBaselineSorted(benchmark::State& s) { RunScatterBaseline(s, true); }

// Reduces batches of state.range(0) updates: the same batch every time, or `distinct`
// different batches in turn (so that what one batch touches in the accumulator is no
// longer in the caches when it comes round again). With `ascending`, each update's indices
// are distinct and sorted, as most clients send them (and fedagg-loadgen does). `backend` reduces them (the check's result comes
// from the same backend), with `options` (deterministic: the exact sums).
void RunReduction(benchmark::State& state, Intrinsic intrinsic, std::vector<int64_t> shape,
                  int64_t nnz, int distinct = 1, bool ascending = false,
                  const AccumulatorFactory& backend = CpuAccumulatorFactory::Default(),
                  ReductionOptions options = {}) {
  const int kBatch = static_cast<int>(state.range(0));
  absl::StatusOr<std::shared_ptr<const ReductionSpec>> spec = ReductionSpec::Create(
      ValueType::Tensor(DType::kFloat32, shape), {{intrinsic}}, options);
  if (!spec.ok()) return state.SkipWithError(std::string(spec.status().message()).c_str());
  const FieldSpec& field = (*spec)->fields()[0];
  std::vector<Batch> batches;
  for (int b = 0; b < distinct; ++b) {
    batches.push_back(MakeBatch(field.encoding, field.rows, field.row_width, nnz, IsWeighted(intrinsic), kBatch,
                                42 + static_cast<uint64_t>(b)));
    if (ascending) {  // as clients send them, marked so as the service's validation marks them
      for (std::vector<int64_t>& ids : batches.back().indices) MakeDistinctAscending(ids, field.rows);
      for (UpdateView& view : batches.back().views) view.fields[0].ascending = true;
    }
  }

  PartialAggregate check(*spec, backend);
  if (!check.AccumulateBatch(batches[0].views).ok()) return state.SkipWithError("accumulate failed");
  absl::StatusOr<AggregateResult> result = check.Report();
  const double error = MaxRelativeError(ReferenceReduce(**spec, batches[0].views), *result);
  if (!(error < 1e-4)) return state.SkipWithError("result differs from the reference");

  PartialAggregate partial(*spec, backend);
  size_t next = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(partial.AccumulateBatch(batches[next].views));
    next = (next + 1) % batches.size();
  }
  state.SetBytesProcessed(state.iterations() * PayloadBytes(batches[0]));
  state.SetItemsProcessed(state.iterations() * kBatch);
  state.counters["updates_per_batch"] = kBatch;
}

void BM_DenseSum(benchmark::State& s) { RunReduction(s, Intrinsic::kFederatedSum, {kDenseElements}, 0); }

// A dense sum of a batch of state.range(0) updates sent quantized to state.range(1) bits
// (value_encoding.h, blocks of 256), decoded as added. Bytes processed are the model's:
// the float32 bytes the batch stands for, so the rate reads against BM_DenseSum's; the
// bytes it reads are a counter (wire_bytes_per_update).
void BM_DenseSumQuantized(benchmark::State& state) {
  const int kBatch = static_cast<int>(state.range(0));
  const ValueEncoding encoding = ValueEncoding::Quantized(static_cast<int>(state.range(1)));
  absl::StatusOr<std::shared_ptr<const ReductionSpec>> spec = ReductionSpec::Create(
      ValueType::Tensor(DType::kFloat32, {kDenseElements}), {FieldIntrinsic{Intrinsic::kFederatedSum, false, encoding}});
  if (!spec.ok()) return state.SkipWithError(std::string(spec.status().message()).c_str());
  const Batch plain = MakeBatch(Encoding::kDense, 1, kDenseElements, 0, false, kBatch);
  std::vector<std::vector<std::byte>> encoded(static_cast<size_t>(kBatch));
  std::vector<UpdateView> views;
  for (int b = 0; b < kBatch; ++b) {
    encoded[b].resize(encoding.EncodedBytes(kDenseElements));
    if (!EncodeValues(encoding, DType::kFloat32, AsBytes(absl::MakeConstSpan(plain.values[b])),
                      RoundingStream(static_cast<uint64_t>(b), 0), absl::MakeSpan(encoded[b]))
             .ok()) {
      return state.SkipWithError("encode failed");
    }
    views.push_back(UpdateView{{FieldValue{Encoding::kDense, DType::kFloat32, {}, absl::MakeConstSpan(encoded[b])}},
                               std::nullopt});
  }
  PartialAggregate check(*spec);
  if (!check.AccumulateBatch(views).ok()) return state.SkipWithError("accumulate failed");
  const double error = MaxRelativeError(ReferenceReduce(**spec, views), *check.Report());
  if (!(error < 1e-4)) return state.SkipWithError("result differs from the reference");
  PartialAggregate partial(*spec);
  for (auto _ : state) benchmark::DoNotOptimize(partial.AccumulateBatch(views));
  state.SetBytesProcessed(state.iterations() * kBatch * kDenseElements * static_cast<int64_t>(sizeof(float)));
  state.SetItemsProcessed(state.iterations() * kBatch);
  state.counters["updates_per_batch"] = kBatch;
  state.counters["wire_bytes_per_update"] = static_cast<double>(encoding.EncodedBytes(kDenseElements));
}
void BM_DenseWeightedMean(benchmark::State& s) {
  RunReduction(s, Intrinsic::kFederatedWeightedMean, {kDenseElements}, 0);
}
void BM_DenseMax(benchmark::State& s) { RunReduction(s, Intrinsic::kFederatedMax, {kDenseElements}, 0); }
// A deterministic aggregation's exact sums (exact_field_accumulator.h), beside the rows
// above: the same batches, summed without rounding.
constexpr ReductionOptions kDeterministic{.deterministic = true};
void BM_DenseSumDeterministic(benchmark::State& s) {
  RunReduction(s, Intrinsic::kFederatedSum, {kDenseElements}, 0, 1, false, CpuAccumulatorFactory::Default(),
               kDeterministic);
}
void BM_DenseWeightedMeanDeterministic(benchmark::State& s) {
  RunReduction(s, Intrinsic::kFederatedWeightedMean, {kDenseElements}, 0, 1, false, CpuAccumulatorFactory::Default(),
               kDeterministic);
}
void BM_SparseSumAscendingDeterministic(benchmark::State& s) {
  RunReduction(s, Intrinsic::kSparseSum, {kSparseCoordinates}, kSparseNnz, 16, true, CpuAccumulatorFactory::Default(),
               kDeterministic);
}
void BM_SparseSumSparseDeterministic(benchmark::State& s) {
  RunReduction(s, Intrinsic::kSparseSumSparse, {kSparseCoordinates}, kSparseNnz, 1, false,
               CpuAccumulatorFactory::Default(), kDeterministic);
}
void BM_SparseSum(benchmark::State& s) {
  RunReduction(s, Intrinsic::kSparseSum, {kSparseCoordinates}, kSparseNnz);
}
// Sorted indices, as most clients send them; 16 different batches in turn, as in a round:
// what one touches of the 64 MiB table (about 10 MiB per update) is no longer cached when
// it comes round again.
void BM_SparseSumAscending(benchmark::State& s) {
  RunReduction(s, Intrinsic::kSparseSum, {kSparseCoordinates}, kSparseNnz, 16, true);
}
// The same batches, unsorted.
void BM_SparseSumColdTable(benchmark::State& s) {
  RunReduction(s, Intrinsic::kSparseSum, {kSparseCoordinates}, kSparseNnz, 16);
}
void BM_SparseMean(benchmark::State& s) {
  RunReduction(s, Intrinsic::kSparseMean, {kSparseCoordinates}, kSparseNnz);
}
void BM_SparseSumSparse(benchmark::State& s) {
  RunReduction(s, Intrinsic::kSparseSumSparse, {kSparseCoordinates}, kSparseNnz);
}
// Row-sparse: 1,000 rows of 64 floats out of a [1M, 64] embedding table per update.
void BM_RowSparseSum(benchmark::State& s) {
  RunReduction(s, Intrinsic::kRowSparseSum, {1 << 20, 64}, 1000);
}
void BM_RowSparseMean(benchmark::State& s) {
  RunReduction(s, Intrinsic::kRowSparseMean, {1 << 20, 64}, 1000);
}
// The same shape, 48 different batches in turn: the rows they touch (96 MiB of the
// 256 MiB table) do not fit the caches, so every row add misses, as in a long round of
// an embedding model whose clients touch different rows.
void BM_RowSparseSumColdRows(benchmark::State& s) {
  RunReduction(s, Intrinsic::kRowSparseSum, {1 << 20, 64}, 1000, 48);
}
// The same, each update's row ids distinct and ascending, as most clients send them.
void BM_RowSparseSumColdRowsAscending(benchmark::State& s) {
  RunReduction(s, Intrinsic::kRowSparseSum, {1 << 20, 64}, 1000, 48, true);
}

// The result of a sparse_sum (or sparse_mean) over 16 Mi coordinates (a 64 MiB float32
// table, one batch of 8 updates accumulated): what finalization costs beside the
// reductions. Bytes: the table's.
void RunReport(benchmark::State& state, Intrinsic intrinsic, const AccumulatorFactory& backend) {
  absl::StatusOr<std::shared_ptr<const ReductionSpec>> spec =
      ReductionSpec::Create(ValueType::Tensor(DType::kFloat32, {kSparseCoordinates}), {{intrinsic}});
  if (!spec.ok()) return state.SkipWithError(std::string(spec.status().message()).c_str());
  const Batch batch = MakeBatch(Encoding::kSparse, kSparseCoordinates, 1, kSparseNnz, false);
  PartialAggregate partial(*spec, backend);
  if (!partial.AccumulateBatch(batch.views).ok()) return state.SkipWithError("accumulate failed");
  for (auto _ : state) {
    absl::StatusOr<AggregateResult> result = partial.Report();
    if (!result.ok()) return state.SkipWithError("report failed");
    benchmark::DoNotOptimize(result->fields[0].value.bytes.data());
  }
  state.SetBytesProcessed(state.iterations() * kSparseCoordinates * static_cast<int64_t>(sizeof(float)));
}
void BM_SparseSumReport(benchmark::State& s) { RunReport(s, Intrinsic::kSparseSum, CpuAccumulatorFactory::Default()); }
void BM_SparseMeanReport(benchmark::State& s) { RunReport(s, Intrinsic::kSparseMean, CpuAccumulatorFactory::Default()); }
BENCHMARK(BM_SparseSumReport)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SparseMeanReport)->UseRealTime()->Unit(benchmark::kMillisecond);

#if defined(FEDAGG_BENCH_THRUST_OMP)
void BM_ThrustOmpSparseSumReport(benchmark::State& s) { RunReport(s, Intrinsic::kSparseSum, ThrustOmpBackend()); }
void BM_ThrustOmpSparseMeanReport(benchmark::State& s) { RunReport(s, Intrinsic::kSparseMean, ThrustOmpBackend()); }
BENCHMARK(BM_ThrustOmpSparseSumReport)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ThrustOmpSparseMeanReport)->UseRealTime()->Unit(benchmark::kMillisecond);
void BM_ThrustOmpDenseSum(benchmark::State& s) {
  RunReduction(s, Intrinsic::kFederatedSum, {kDenseElements}, 0, 1, false, ThrustOmpBackend());
}
void BM_ThrustOmpSparseSumAscending(benchmark::State& s) {
  RunReduction(s, Intrinsic::kSparseSum, {kSparseCoordinates}, kSparseNnz, 16, true, ThrustOmpBackend());
}
void BM_ThrustOmpRowSparseSumColdRows(benchmark::State& s) {
  RunReduction(s, Intrinsic::kRowSparseSum, {1 << 20, 64}, 1000, 48, false, ThrustOmpBackend());
}
void BM_ThrustOmpRowSparseSumColdRowsAscending(benchmark::State& s) {
  RunReduction(s, Intrinsic::kRowSparseSum, {1 << 20, 64}, 1000, 48, true, ThrustOmpBackend());
}
BENCHMARK(BM_ThrustOmpDenseSum)->Arg(8)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ThrustOmpSparseSumAscending)->Arg(8)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ThrustOmpRowSparseSumColdRows)->Arg(8)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ThrustOmpRowSparseSumColdRowsAscending)->Arg(8)->UseRealTime()->Unit(benchmark::kMillisecond);
#endif

// Differential privacy's clipping of one 16 MiB float32 update on the receiving thread
// (update_clipping.h), as Aggregation::Validate runs it: its norm alone when the update is
// within the bound (range 0), its norm and the scaling of every value when it is not
// (range 1; the values are put back between iterations, untimed). Bytes: the update's.
void BM_ClipDenseUpdate(benchmark::State& state) {
  const bool clipped = state.range(0) != 0;
  ReductionOptions options;
  options.privacy = PrivacySpec{clipped ? 1.0 : 1e30, 1.0, 1, std::nullopt};
  absl::StatusOr<std::shared_ptr<const ReductionSpec>> spec =
      ReductionSpec::Create(ValueType::Tensor(DType::kFloat32, {kDenseElements}), {{Intrinsic::kFederatedSum}}, options);
  if (!spec.ok()) return state.SkipWithError(std::string(spec.status().message()).c_str());
  const Batch batch = MakeBatch(Encoding::kDense, 1, kDenseElements, 0, false, 1);
  std::vector<std::byte> values(batch.values[0].size() * sizeof(float));
  std::memcpy(values.data(), batch.values[0].data(), values.size());
  UpdateView view = batch.views[0];
  view.fields[0].values = absl::MakeConstSpan(values);
  const std::vector<absl::Span<std::byte>> writable = {absl::MakeSpan(values)};
  for (auto _ : state) {
    absl::StatusOr<bool> clip = ClipUpdate(**spec, view, writable);
    if (!clip.ok() || *clip != clipped) return state.SkipWithError("clipping did not do what was expected");
    if (clipped) {
      state.PauseTiming();
      std::memcpy(values.data(), batch.values[0].data(), values.size());
      state.ResumeTiming();
    }
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(values.size()));
}
BENCHMARK(BM_ClipDenseUpdate)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

// The root's differential-privacy noise on a 16 MiB float32 sum (4 Mi coordinates, sigma
// 1): snapped to the grid, a discrete Gaussian integer each, on the node's threads
// (privacy_noise.h), once per aggregation at finalization. Bytes: the sum's.
void BM_PrivacyNoise(benchmark::State& state) {
  ReductionOptions options;
  options.privacy = PrivacySpec{1.0, 1.0, 1, std::nullopt};
  absl::StatusOr<std::shared_ptr<const ReductionSpec>> spec =
      ReductionSpec::Create(ValueType::Tensor(DType::kFloat32, {kDenseElements}), {{Intrinsic::kFederatedSum}}, options);
  if (!spec.ok()) return state.SkipWithError(std::string(spec.status().message()).c_str());
  const NoiseKey key{};
  AggregateResult result;
  result.contributions = 1;
  result.fields.push_back(ReportedField{"w", Intrinsic::kFederatedSum, Tensor{DType::kFloat32, {kDenseElements}, {}}});
  result.fields[0].value.bytes.resize(static_cast<size_t>(kDenseElements) * sizeof(float));
  for (auto _ : state) {
    if (!AddPrivacyNoise(**spec, key, 0, result).ok()) return state.SkipWithError("noise failed");
    benchmark::DoNotOptimize(result.fields[0].value.bytes.data());
  }
  state.SetBytesProcessed(state.iterations() * kDenseElements * static_cast<int64_t>(sizeof(float)));
}
BENCHMARK(BM_PrivacyNoise)->UseRealTime()->Unit(benchmark::kMillisecond);

// CRC-32C over a 16 MiB update in pieces of `state.range(0)` bytes, each piece checksummed
// right after it was copied into the update's buffer (update_assembler.cc): one thread, the
// piece in cache.
void BM_Crc32cReceive(benchmark::State& state) {
  const size_t piece = static_cast<size_t>(state.range(0));
  const Batch batch = MakeBatch(Encoding::kDense, 1, kDenseElements, 0, false, 1);
  const auto* bytes = reinterpret_cast<const unsigned char*>(batch.values[0].data());
  const size_t total = batch.values[0].size() * sizeof(float);
  std::vector<unsigned char> buffer(total);
  for (auto _ : state) {
    uint32_t crc = 0;
    for (size_t at = 0; at < total; at += piece) {
      const size_t n = std::min(piece, total - at);
      std::memcpy(buffer.data() + at, bytes + at, n);
      crc = Crc32cExtend(crc, buffer.data() + at, n);
    }
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(total));
}

// Validation of one sparse_sum update at 1% of 16 Mi coordinates (its indices sorted, as
// most clients send them), as every received update pays it: one thread, the update in
// cache (the receive path validates what it has just copied). Its indices are what it reads.
void BM_ValidateSparseUpdate(benchmark::State& state) {
  absl::StatusOr<std::shared_ptr<const ReductionSpec>> spec = ReductionSpec::Create(
      ValueType::Tensor(DType::kFloat32, {kSparseCoordinates}), {{Intrinsic::kSparseSum}});
  if (!spec.ok()) return state.SkipWithError(std::string(spec.status().message()).c_str());
  Batch batch = MakeBatch(Encoding::kSparse, kSparseCoordinates, 1, kSparseNnz, false, 1);
  std::sort(batch.indices[0].begin(), batch.indices[0].end());
  if (!ValidateUpdate(**spec, batch.views[0]).ok()) return state.SkipWithError("a valid update was refused");
  for (auto _ : state) benchmark::DoNotOptimize(ValidateUpdate(**spec, batch.views[0]));
  state.SetBytesProcessed(state.iterations() * PayloadBytes(batch));
}
BENCHMARK(BM_ValidateSparseUpdate)->UseRealTime()->Unit(benchmark::kMicrosecond);

// Update buffers as the receive path uses them: allocated, written whole, released, in
// turn, 16 alive at once (a window's worth), their sizes spread by clients' data
// (uniform in [0.75, 1.25] MiB, as sparse updates of different clients are). What the
// kernel's page faults and zeroing of fresh memory cost when a released buffer does not
// serve the next one.
void BM_UpdateBuffersOfVaryingSize(benchmark::State& state) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<size_t> size(size_t{3} << 18, size_t{5} << 18);
  std::vector<LargeAllocation> alive(16);
  size_t next = 0;
  int64_t bytes = 0;
  for (auto _ : state) {
    LargeAllocation buffer(size(rng));
    std::memset(buffer.data(), 1, buffer.size());
    bytes += static_cast<int64_t>(buffer.size());
    alive[next] = std::move(buffer);  // releases the oldest
    next = (next + 1) % alive.size();
  }
  state.SetBytesProcessed(bytes);
}
BENCHMARK(BM_UpdateBuffersOfVaryingSize)->UseRealTime()->Unit(benchmark::kMicrosecond);

BENCHMARK(BM_Crc32cReceive)->Arg(16 << 10)->Arg(1 << 20)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BandwidthBaseline)->Arg(8)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ScatterBaseline)->Arg(8)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ScatterBaselineSorted)->Arg(8)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DenseSum)->Arg(8)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DenseSumQuantized)->Args({1, 8})->Args({4, 8})->Args({16, 8})->Args({16, 4})->Args({16, 2})->Args({16, 1})->UseRealTime()->Unit(
    benchmark::kMillisecond);
BENCHMARK(BM_DenseWeightedMean)->Arg(8)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DenseMax)->Arg(8)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DenseSumDeterministic)->Arg(8)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DenseWeightedMeanDeterministic)->Arg(8)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SparseSumAscendingDeterministic)->Arg(8)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SparseSumSparseDeterministic)->Arg(8)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SparseSum)->Arg(8)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SparseSumColdTable)->Arg(1)->Arg(8)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SparseSumAscending)->Arg(1)->Arg(3)->Arg(8)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SparseMean)->Arg(8)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SparseSumSparse)->Arg(8)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RowSparseSum)->Arg(8)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RowSparseMean)->Arg(8)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RowSparseSumColdRows)->Arg(8)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RowSparseSumColdRowsAscending)->Arg(8)->UseRealTime()->Unit(benchmark::kMillisecond);

// Console output as usual, plus each benchmark's bytes/s remembered for the ratio table.
// With repetitions, the median aggregate is the figure used.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      auto it = run.counters.find("bytes_per_second");
      if (it == run.counters.end() || run.error_occurred) continue;
      const bool median = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      const bool single = run.run_type == Run::RT_Iteration && run.repetitions <= 1;
      if (!median && !single) continue;
      std::string name = run.run_name.function_name;
      if (!run.run_name.args.empty()) name += "/" + run.run_name.args;
      rates_[name] = it->second.value;
    }
  }
  // Every row against the bandwidth baseline of its batch size (that of 8 updates for a
  // row of another size); the sparse family's rows also against the two scatter baselines
  // (random and sorted indices), where they ran.
  void PrintRatios() const {
    auto fallback = rates_.find("BM_BandwidthBaseline/8");
    if (fallback == rates_.end()) return;
    auto scatter = rates_.find("BM_ScatterBaseline/8");
    auto sorted = rates_.find("BM_ScatterBaselineSorted/8");
    std::printf("\n%-28s %8s %12s %12s %12s\n", "benchmark", "GB/s", "vs baseline", "vs scatter",
                "vs sorted");
    for (const auto& [name, rate] : rates_) {
      const size_t slash = name.rfind('/');
      auto baseline = slash == std::string::npos ? rates_.end() : rates_.find("BM_BandwidthBaseline" + name.substr(slash));
      if (baseline == rates_.end()) baseline = fallback;
      std::printf("%-28s %8.2f %11.0f%%", name.c_str(), rate / 1e9, 100 * rate / baseline->second);
      if (name.find("Sparse") != std::string::npos) {
        for (auto other : {scatter, sorted}) {
          if (other == rates_.end()) {
            std::printf(" %12s", "-");
          } else {
            std::printf(" %11.0f%%", 100 * rate / other->second);
          }
        }
      }
      std::printf("\n");
    }
  }

 private:
  std::map<std::string, double> rates_;
};

}  // namespace
}  // namespace fedagg

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  fedagg::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintRatios();
  benchmark::Shutdown();
  return 0;
}
