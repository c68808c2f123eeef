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

// Whether each update lists its indices in ascending order (repeats allowed), as updates
// made from sorted coordinates (np.nonzero, SciPy's canonical COO, top-k after a sort) do.
// An update validation marked (FieldValue::ascending) is not read again; the others are,
// up to their first descent, so an unsorted update costs little to tell.
std::vector<uint8_t> AscendingUpdates(absl::Span<const FieldValue* const> values, ThreadPool& pool) {
  std::vector<uint8_t> ascending(values.size(), 1);
  size_t entries = 0;  // of the updates to read
  for (const FieldValue* value : values) entries += value->ascending ? 0 : value->indices.size();
  if (entries == 0) return ascending;
  const int64_t min_updates = entries < kMinEntriesToSplit ? static_cast<int64_t>(values.size()) : 1;
  pool.ParallelFor(static_cast<int64_t>(values.size()), std::max<int64_t>(min_updates, 1), [&](int64_t begin, int64_t end) {
    constexpr size_t kBlock = 4096;  // checked a block at a time: the comparison vectorizes
    for (int64_t u = begin; u < end; ++u) {
      if (values[static_cast<size_t>(u)]->ascending) continue;
      const absl::Span<const int64_t> ids = values[static_cast<size_t>(u)]->indices;
      for (size_t block = 1; block < ids.size() && ascending[static_cast<size_t>(u)]; block += kBlock) {
        bool descends = false;
        for (size_t k = block; k < std::min(ids.size(), block + kBlock); ++k) descends |= ids[k] < ids[k - 1];
        if (descends) ascending[static_cast<size_t>(u)] = 0;
      }
    }
  });
  return ascending;
}

// A run of whole updates [first, last) of the batch, scattered at once: with every update
// ascending, straight from the updates; otherwise through the partition buffer.
struct Run {
  size_t first = 0;
  size_t last = 0;
  size_t entries = 0;
  bool ascending = false;
};

std::vector<Run> PlanRuns(absl::Span<const FieldValue* const> values, absl::Span<const uint8_t> ascending,
                          const Layout& layout) {
  std::vector<Run> runs;
  Run run;
  for (size_t i = 0; i < values.size(); ++i) {
    const size_t n = values[i]->indices.size();
    if (n == 0) continue;  // adds nothing, and must not cut a run
    const bool buffer_full = !run.ascending && (run.entries + n > kMaxChunkEntries ||
                                                run.last - run.first >= layout.max_run_updates);
    if (run.entries > 0 && (run.ascending != static_cast<bool>(ascending[i]) || buffer_full)) {
      runs.push_back(run);
      run = Run{};
    }
    if (run.entries == 0) run = Run{i, i, 0, static_cast<bool>(ascending[i])};
    run.last = i + 1;
    run.entries += n;
  }
  if (run.entries > 0) runs.push_back(run);
  return runs;
}

// Whether a bucket with `entries` entries has its share of the table (`bytes` of it)
// prefetched in order before they are added: when they touch most of its cache lines,
// fetching it at streaming speed beats a miss per line in random order.
bool WorthPrefetching(size_t entries, size_t bytes) { return entries * kDenseBucketLinesPerEntry * 64 >= bytes; }

// Prefetches a bucket's share of the target, all of it.
template <typename Acc>
void PrefetchBucket(const ScatterTarget<Acc>& target, size_t base, size_t width) {
  PrefetchRange(target.acc.data() + base, width * sizeof(Acc));
  if (!target.counts.empty()) PrefetchRange(target.counts.data() + base, width * sizeof(int64_t));
  if (!target.weight_sums.empty()) PrefetchRange(target.weight_sums.data() + base, width * sizeof(double));
}

// What a run's scatter works on: its updates and their weights, the table's layout, the
// target and the pool.
template <typename Acc>
struct RunInput {
  absl::Span<const FieldValue* const> values;
  absl::Span<const double> weights;
  bool weighted = false;
  const Layout& layout;
  ScatterTarget<Acc> target;
  ThreadPool& pool;
};

template <typename Acc>
class RunScatter {
 public:
  RunScatter(RunInput<Acc> in, Entry<Acc>* buffer) : in_(in), entries_(buffer) {
    size_t entries = 0;
    for (const FieldValue* value : in_.values) entries += value->indices.size();
    threads_ = entries < kMinEntriesToSplit ? 1 : in_.pool.threads();
  }

  void Partition();
  void Scatter();

 private:
  void ScatterBucket(int64_t bucket, std::vector<uint64_t>& touched) const;

  const RunInput<Acc> in_;
  Entry<Acc>* const entries_;
  std::vector<size_t> bucket_start_;  // per bucket, its first entry in entries_; then the total
  int threads_ = 1;
};

template <typename Acc>
void RunScatter<Acc>::Partition() {
  const int bits = in_.layout.bucket_bits;
  const uint32_t mask = in_.layout.offset_mask();
  bucket_start_ = PartitionByCoordinate(in_.values, bits, static_cast<size_t>(in_.layout.buckets), threads_, in_.pool,
                                        entries_, [&](size_t u, uint64_t index, auto in) {
                                          const Acc value = in_.weighted ? static_cast<Acc>(in_.weights[u]) * Widen<Acc>(in)
                                                                      : Widen<Acc>(in);
                                          return Entry<Acc>{static_cast<uint32_t>(u << bits) |
                                                                (static_cast<uint32_t>(index) & mask),
                                                            value};
                                        }).bucket_start;
}

template <typename Acc>
void RunScatter<Acc>::Scatter() {
  std::atomic<int64_t> next_bucket{0};
  const size_t words = ((size_t{1} << in_.layout.bucket_bits) + 63) / 64;
  in_.pool.ParallelFor(threads_, 1, [&](int64_t, int64_t) {
    // Which coordinates of the bucket the current update has counted already.
    std::vector<uint64_t> touched(in_.target.counts.empty() ? 0 : words);
    for (int64_t b; (b = next_bucket.fetch_add(1, std::memory_order_relaxed)) < in_.layout.buckets;) {
      ScatterBucket(b, touched);
    }
  });
}

template <typename Acc>
void RunScatter<Acc>::ScatterBucket(int64_t bucket, std::vector<uint64_t>& touched) const {
  const Entry<Acc>* entries = entries_ + bucket_start_[static_cast<size_t>(bucket)];
  const size_t n = bucket_start_[static_cast<size_t>(bucket) + 1] - bucket_start_[static_cast<size_t>(bucket)];
  if (n == 0) return;
  const size_t base = static_cast<size_t>(bucket) << in_.layout.bucket_bits;
  const uint32_t mask = in_.layout.offset_mask();
  const int bits = in_.layout.bucket_bits;
  Acc* acc = in_.target.acc.data() + base;
  int64_t* counts = in_.target.counts.empty() ? nullptr : in_.target.counts.data() + base;
  double* weight_sums = in_.target.weight_sums.empty() ? nullptr : in_.target.weight_sums.data() + base;
  const size_t width = std::min<size_t>(size_t{1} << in_.layout.bucket_bits, in_.target.acc.size() - base);
  if (WorthPrefetching(n, width * sizeof(Acc))) PrefetchBucket(in_.target, base, width);
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
    if (weight_sums != nullptr) weight_sums[offset] += in_.weights[update];
  }
  if (counts != nullptr) {
    for (size_t j = segment; j < n; ++j) touched[(entries[j].key & mask) / 64] = 0;
  }
}

// Scatters a run of ascending updates with no partition buffer: an update's entries in a
// bucket are a contiguous range of it. Threads take groups of consecutive buckets; in a
// group, each update's first entry is found by one binary search, and then bucket by
// bucket every update adds its range, in batch order, while the bucket's share of the
// table stays in the cache. Per coordinate, values add in batch order, as in a serial
// scatter; an update counts a coordinate once however often it repeats it (repeats are
// adjacent).
template <typename Acc>
class AscendingRunScatter {
 public:
  AscendingRunScatter(RunInput<Acc> in, size_t entries)
      : in_(in), entries_(entries), threads_(entries < kMinEntriesToSplit ? 1 : in.pool.threads()) {}

  void Scatter();

 private:
  // Adds update u's entries from position k while their index is below `limit`; returns
  // the position of the first one it did not add.
  template <bool kCounts, typename In>
  size_t AddRange(size_t u, size_t k, uint64_t limit) const;
  void ScatterGroup(int64_t first_bucket, int64_t last_bucket, std::vector<size_t>& cursor) const;

  const RunInput<Acc> in_;
  const size_t entries_;
  const int threads_;
};

template <typename Acc>
void AscendingRunScatter<Acc>::Scatter() {
  // Groups small enough to balance the threads, large enough that the binary searches
  // (one per update and group) cost little.
  const int64_t group = std::max<int64_t>(1, in_.layout.buckets / (int64_t{8} * threads_));
  std::atomic<int64_t> next_group{0};
  in_.pool.ParallelFor(threads_, 1, [&](int64_t, int64_t) {
    std::vector<size_t> cursor(in_.values.size());  // per update, its next entry to add
    for (int64_t g; (g = next_group.fetch_add(1, std::memory_order_relaxed)) * group < in_.layout.buckets;) {
      ScatterGroup(g * group, std::min(in_.layout.buckets, (g + 1) * group), cursor);
    }
  });
}

template <typename Acc>
void AscendingRunScatter<Acc>::ScatterGroup(int64_t first_bucket, int64_t last_bucket,
                                            std::vector<size_t>& cursor) const {
  const int bits = in_.layout.bucket_bits;
  for (size_t u = 0; u < in_.values.size(); ++u) {
    const absl::Span<const int64_t> ids = in_.values[u]->indices;
    cursor[u] = static_cast<size_t>(std::lower_bound(ids.begin(), ids.end(), first_bucket << bits) - ids.begin());
  }
  const size_t rows = in_.target.acc.size();
  const bool counts = !in_.target.counts.empty();
  for (int64_t bucket = first_bucket; bucket < last_bucket; ++bucket) {
    const size_t base = static_cast<size_t>(bucket) << bits;
    const size_t width = std::min<size_t>(size_t{1} << bits, rows - base);
    // The run's entries spread evenly, as the bucket's expected share of them.
    const double expected_entries = static_cast<double>(entries_) * static_cast<double>(width) / static_cast<double>(rows);
    if (WorthPrefetching(static_cast<size_t>(expected_entries), width * sizeof(Acc))) PrefetchBucket(in_.target, base, width);
    const uint64_t limit = base + width;
    for (size_t u = 0; u < in_.values.size(); ++u) {
      DispatchDType(in_.values[u]->dtype, [&](auto tag) {
        using In = typename decltype(tag)::type;
        cursor[u] = counts ? AddRange<true, In>(u, cursor[u], limit) : AddRange<false, In>(u, cursor[u], limit);
      });
    }
  }
}

template <typename Acc>
template <bool kCounts, typename In>
size_t AscendingRunScatter<Acc>::AddRange(size_t u, size_t k, uint64_t limit) const {
  const int64_t* ids = in_.values[u]->indices.data();
  const size_t n = in_.values[u]->indices.size();
  const In* in = reinterpret_cast<const In*>(in_.values[u]->values.data());
  const Acc weight = static_cast<Acc>(in_.weights[u]);
  Acc* acc = in_.target.acc.data();
  for (; k < n && static_cast<uint64_t>(ids[k]) < limit; ++k) {
    __builtin_prefetch(acc + ids[std::min(k + kPrefetchDistance, n - 1)], 1);
    const size_t c = static_cast<size_t>(ids[k]);
    acc[c] = Add(acc[c], in_.weighted ? weight * Widen<Acc>(in[k]) : Widen<Acc>(in[k]));
    if constexpr (kCounts) {
      if (k > 0 && ids[k] == ids[k - 1]) continue;  // counted at its first occurrence
      ++in_.target.counts[c];
      if (!in_.target.weight_sums.empty()) in_.target.weight_sums[c] += in_.weights[u];
    }
  }
  return k;
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
  const std::vector<Run> runs = PlanRuns(values, AscendingUpdates(values, pool), layout);
  size_t largest_partitioned = 0;
  for (const Run& run : runs) {
    if (!run.ascending) largest_partitioned = std::max(largest_partitioned, run.entries);
  }
  LargeAllocation buffer(largest_partitioned * sizeof(Entry<Acc>));
  for (const Run& run : runs) {
    const RunInput<Acc> input{values.subspan(run.first, run.last - run.first),
                              weights.subspan(run.first, run.last - run.first), weighted, layout, target, pool};
    if (run.ascending) {
      AscendingRunScatter<Acc>(input, run.entries).Scatter();
      continue;
    }
    RunScatter<Acc> scatter(input, reinterpret_cast<Entry<Acc>*>(buffer.data()));
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
