// Partitioned scatter of COO batches into a dense table (see the header).
#include "service/core/cpu_partitioned_scatter.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <vector>

#include "service/core/cpu_coordinate_partition.h"
#include "service/core/cpu_kernels.h"
#include "service/core/large_allocation.h"

namespace fedagg::cpu {
namespace {

// A bucket's share of the dense state (accumulator, counts, weight sums) is at most this
// many bytes, so that it stays in a core's L2 cache (1 MiB here) while the bucket's
// entries stream past it.
constexpr size_t kBucketStateBytes = size_t{512} << 10;
// At most 2^10 buckets: the partition pass writes to every bucket at once, and more
// write streams than that no longer fit the L1 cache and the TLB. A larger table gets
// larger buckets.
constexpr int kMaxFanoutBits = 10;
// Entries partitioned at once (a run of whole updates; one update may have more).
constexpr size_t kMaxChunkEntries = size_t{1} << 22;
// A bucket with at least one entry per this many cache lines of its share of the table
// has that share prefetched in order before its entries are added.
constexpr size_t kDenseBucketLinesPerEntry = 4;
// Entries ahead of the one being added whose target is prefetched.
constexpr size_t kPrefetchDistance = 16;

// Prefetches [data, data + bytes) for writing, one cache line at a time, in order.
void PrefetchRange(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  for (size_t offset = 0; offset < bytes; offset += 64) __builtin_prefetch(p + offset, 1);
}

// One entry of the partition buffer. The key packs the entry's update (its position in
// the run) above its coordinate's offset within its bucket.
template <typename Acc>
struct Entry {
  uint32_t key;
  Acc value;  // widened; times the update's weight for the weighted mean
};

// How the coordinates are cut into buckets of 2^bucket_bits.
struct Layout {
  int bucket_bits = 0;
  int64_t buckets = 0;
  uint64_t max_run_updates = 0;  // what the key's update part can hold
  uint32_t offset_mask() const { return static_cast<uint32_t>((uint64_t{1} << bucket_bits) - 1); }
};

Layout MakeLayout(int64_t rows, size_t bytes_per_coordinate) {
  const int rows_bits = std::bit_width(static_cast<uint64_t>(rows - 1));
  const int cache_bits = std::bit_width(kBucketStateBytes / bytes_per_coordinate) - 1;
  Layout layout;
  layout.bucket_bits = std::min(rows_bits, std::max(cache_bits, rows_bits - kMaxFanoutBits));
  layout.buckets = ((rows - 1) >> layout.bucket_bits) + 1;
  // A table of 2^42 coordinates or more could not be allocated, so bucket_bits <= 32
  // and the key holds at least one update.
  layout.max_run_updates = uint64_t{1} << (32 - layout.bucket_bits);
  return layout;
}

// A run of whole updates [first, last) of the batch, partitioned and scattered at once.
struct Run {
  size_t first = 0;
  size_t last = 0;
  size_t entries = 0;
};

std::vector<Run> PlanRuns(absl::Span<const FieldValue* const> values, const Layout& layout) {
  std::vector<Run> runs;
  Run run;
  for (size_t i = 0; i < values.size(); ++i) {
    const size_t n = values[i]->indices.size();
    if (run.last > run.first &&
        (run.entries + n > kMaxChunkEntries || run.last - run.first >= layout.max_run_updates)) {
      runs.push_back(run);
      run = Run{i, i, 0};
    }
    run.last = i + 1;
    run.entries += n;
  }
  if (run.entries > 0) runs.push_back(run);
  return runs;
}

template <typename Acc>
class RunScatter {
 public:
  RunScatter(absl::Span<const FieldValue* const> values, absl::Span<const double> weights,
             bool weighted, const Layout& layout, ScatterTarget<Acc> target, ThreadPool& pool,
             Entry<Acc>* buffer)
      : values_(values), weights_(weights), weighted_(weighted), layout_(layout),
        target_(target), pool_(pool), entries_(buffer) {
    size_t entries = 0;
    for (const FieldValue* value : values) entries += value->indices.size();
    threads_ = entries < kMinEntriesToSplit ? 1 : pool.threads();
  }

  void Partition();
  void Scatter();

 private:
  void ScatterBucket(int64_t bucket, std::vector<uint64_t>& touched) const;

  absl::Span<const FieldValue* const> values_;
  absl::Span<const double> weights_;
  const bool weighted_;
  const Layout& layout_;
  const ScatterTarget<Acc> target_;
  ThreadPool& pool_;
  Entry<Acc>* const entries_;
  std::vector<size_t> bucket_start_;  // per bucket, its first entry in entries_; then the total
  int threads_ = 1;
};

template <typename Acc>
void RunScatter<Acc>::Partition() {
  const int bits = layout_.bucket_bits;
  const uint32_t mask = layout_.offset_mask();
  bucket_start_ = PartitionByCoordinate(values_, bits, static_cast<size_t>(layout_.buckets), threads_, pool_,
                                        entries_, [&](size_t u, uint64_t index, auto in) {
                                          const Acc value = weighted_ ? static_cast<Acc>(weights_[u]) * Widen<Acc>(in)
                                                                      : Widen<Acc>(in);
                                          return Entry<Acc>{static_cast<uint32_t>(u << bits) |
                                                                (static_cast<uint32_t>(index) & mask),
                                                            value};
                                        }).bucket_start;
}

template <typename Acc>
void RunScatter<Acc>::Scatter() {
  std::atomic<int64_t> next_bucket{0};
  const size_t words = ((size_t{1} << layout_.bucket_bits) + 63) / 64;
  pool_.ParallelFor(threads_, 1, [&](int64_t, int64_t) {
    // Which coordinates of the bucket the current update has counted already.
    std::vector<uint64_t> touched(target_.counts.empty() ? 0 : words);
    for (int64_t b; (b = next_bucket.fetch_add(1, std::memory_order_relaxed)) < layout_.buckets;) {
      ScatterBucket(b, touched);
    }
  });
}

template <typename Acc>
void RunScatter<Acc>::ScatterBucket(int64_t bucket, std::vector<uint64_t>& touched) const {
  const Entry<Acc>* entries = entries_ + bucket_start_[static_cast<size_t>(bucket)];
  const size_t n = bucket_start_[static_cast<size_t>(bucket) + 1] - bucket_start_[static_cast<size_t>(bucket)];
  if (n == 0) return;
  const size_t base = static_cast<size_t>(bucket) << layout_.bucket_bits;
  const uint32_t mask = layout_.offset_mask();
  const int bits = layout_.bucket_bits;
  Acc* acc = target_.acc.data() + base;
  int64_t* counts = target_.counts.empty() ? nullptr : target_.counts.data() + base;
  double* weight_sums = target_.weight_sums.empty() ? nullptr : target_.weight_sums.data() + base;
  // When the entries touch most of the bucket's cache lines, fetching its whole share of
  // the table in order (at streaming speed) beats a miss per line in random order.
  const size_t width = std::min<size_t>(size_t{1} << layout_.bucket_bits, target_.acc.size() - base);
  if (n * kDenseBucketLinesPerEntry * 64 >= width * sizeof(Acc)) {
    PrefetchRange(acc, width * sizeof(Acc));
    if (counts != nullptr) PrefetchRange(counts, width * sizeof(int64_t));
    if (weight_sums != nullptr) PrefetchRange(weight_sums, width * sizeof(double));
  }
  // The entries of the current update within this bucket start at segment.
  size_t segment = 0;
  uint32_t update = entries[0].key >> bits;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t ahead = entries[std::min(i + kPrefetchDistance, n - 1)].key & mask;
    __builtin_prefetch(acc + ahead, 1);
    const uint32_t key = entries[i].key;
    const uint32_t offset = key & mask;
    acc[offset] = Add(acc[offset], entries[i].value);
    if (counts == nullptr) continue;
    __builtin_prefetch(counts + ahead, 1);
    if (weight_sums != nullptr) __builtin_prefetch(weight_sums + ahead, 1);
    if ((key >> bits) != update) {  // a new update: forget what the last one touched
      for (size_t j = segment; j < i; ++j) touched[(entries[j].key & mask) / 64] = 0;
      segment = i;
      update = key >> bits;
    }
    uint64_t& word = touched[offset / 64];
    const uint64_t bit = uint64_t{1} << (offset % 64);
    if (word & bit) continue;
    word |= bit;
    ++counts[offset];
    if (weight_sums != nullptr) weight_sums[offset] += weights_[update];
  }
  if (counts != nullptr) {
    for (size_t j = segment; j < n; ++j) touched[(entries[j].key & mask) / 64] = 0;
  }
}

}  // namespace

template <typename Acc>
void PartitionedScatterAdd(absl::Span<const FieldValue* const> values,
                           absl::Span<const double> weights, bool weighted,
                           ScatterTarget<Acc> target, ThreadPool& pool) {
  const int64_t rows = static_cast<int64_t>(target.acc.size());
  if (rows == 0) return;
  const size_t bytes_per_coordinate = sizeof(Acc) + (target.counts.empty() ? 0 : sizeof(int64_t)) +
                                      (target.weight_sums.empty() ? 0 : sizeof(double));
  const Layout layout = MakeLayout(rows, bytes_per_coordinate);
  const std::vector<Run> runs = PlanRuns(values, layout);
  size_t largest = 0;
  for (const Run& run : runs) largest = std::max(largest, run.entries);
  if (largest == 0) return;
  LargeAllocation buffer(largest * sizeof(Entry<Acc>));
  for (const Run& run : runs) {
    if (run.entries == 0) continue;
    RunScatter<Acc> scatter(values.subspan(run.first, run.last - run.first),
                            weights.subspan(run.first, run.last - run.first), weighted, layout, target,
                            pool, reinterpret_cast<Entry<Acc>*>(buffer.data()));
    scatter.Partition();
    scatter.Scatter();
  }
}

template void PartitionedScatterAdd<float>(absl::Span<const FieldValue* const>, absl::Span<const double>,
                                           bool, ScatterTarget<float>, ThreadPool&);
template void PartitionedScatterAdd<double>(absl::Span<const FieldValue* const>, absl::Span<const double>,
                                            bool, ScatterTarget<double>, ThreadPool&);
template void PartitionedScatterAdd<int64_t>(absl::Span<const FieldValue* const>, absl::Span<const double>,
                                             bool, ScatterTarget<int64_t>, ThreadPool&);

}  // namespace fedagg::cpu
