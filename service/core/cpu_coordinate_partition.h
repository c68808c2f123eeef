// The CPU backend's radix partition of a batch of COO updates by coordinate range: one
// stable pass, spread over the thread pool, that writes every entry of the batch into the
// bucket of its coordinate (bucket = index >> bucket_bits). Each thread takes a contiguous
// slice of the batch's entries (in batch order), counts its entries per bucket, and then
// writes them behind those of the threads before it, so every bucket holds its entries in
// batch order. The sparse family's reductions then work bucket by bucket, each bucket's
// share of their state small enough to stay in a core's cache: the dense-result scatter
// (cpu_partitioned_scatter.h) and the sparse-result unions, float and exact
// (cpu_sparse_union_accumulator.h, exact_sparse_union.h, union_shards.h), which sort each
// shard's entries with the stable radix sort here.
#ifndef FEDAGG_SERVICE_CORE_CPU_COORDINATE_PARTITION_H_
#define FEDAGG_SERVICE_CORE_CPU_COORDINATE_PARTITION_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "service/core/cpu_kernels.h"
#include "service/core/field_value.h"
#include "service/core/thread_pool.h"

namespace fedagg::cpu {

// Below this many entries in a batch, one thread partitions (and reduces) it all:
// splitting costs more.
inline constexpr size_t kMinEntriesToSplit = size_t{1} << 14;

// Calls fn(update, k_begin, k_end) for the entries [begin, end) of a batch, numbered
// across its updates in batch order; starts[u] is the number of entries before update u
// (and starts.back() the total).
template <typename Fn>
void ForEachSlice(const std::vector<size_t>& starts, size_t begin, size_t end, Fn&& fn) {
  size_t u = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), begin) - starts.begin()) - 1;
  for (; u + 1 < starts.size() && starts[u] < end; ++u) {
    const size_t lo = std::max(begin, starts[u]);
    const size_t hi = std::min(end, starts[u + 1]);
    if (lo < hi) fn(u, lo - starts[u], hi - starts[u]);
  }
}

// Where a batch's entries went: bucket b's are out[bucket_start[b], bucket_start[b + 1]).
struct CoordinatePartition {
  std::vector<size_t> bucket_start;  // one per bucket, then the total
};

// Partitions the entries of `values` (indices validated: each < buckets << bucket_bits)
// into `out`, which has room for all of them, using `threads` threads of `pool`.
// make_entry(update, index, value) makes the stored entry from the update's position in
// `values`, the coordinate and the value as sent (of the update's dtype: a generic lambda).
template <typename Entry, typename MakeEntry>
CoordinatePartition PartitionByCoordinate(absl::Span<const FieldValue* const> values, int bucket_bits,
                                          size_t buckets, int threads, ThreadPool& pool, Entry* out,
                                          MakeEntry&& make_entry) {
  std::vector<size_t> starts(values.size() + 1, 0);
  for (size_t u = 0; u < values.size(); ++u) starts[u + 1] = starts[u] + values[u]->indices.size();
  const size_t total = starts.back();
  auto thread_begin = [&](int64_t t) { return total * static_cast<size_t>(t) / static_cast<size_t>(threads); };
  // next[t * buckets + b]: where thread t writes its next entry of bucket b.
  std::vector<size_t> next(static_cast<size_t>(threads) * buckets);
  pool.ParallelFor(threads, 1, [&](int64_t t, int64_t) {
    std::vector<size_t> histogram(buckets);  // the thread's own: no shared cache lines
    ForEachSlice(starts, thread_begin(t), thread_begin(t + 1), [&](size_t u, size_t k0, size_t k1) {
      const int64_t* ids = values[u]->indices.data();
      for (size_t k = k0; k < k1; ++k) ++histogram[static_cast<uint64_t>(ids[k]) >> bucket_bits];
    });
    std::copy(histogram.begin(), histogram.end(), next.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(t) * buckets));
  });
  CoordinatePartition partition;
  partition.bucket_start.assign(buckets + 1, 0);
  size_t position = 0;
  for (size_t b = 0; b < buckets; ++b) {
    partition.bucket_start[b] = position;
    for (size_t t = 0; t < static_cast<size_t>(threads); ++t) {
      const size_t count = next[t * buckets + b];
      next[t * buckets + b] = position;
      position += count;
    }
  }
  partition.bucket_start[buckets] = position;
  pool.ParallelFor(threads, 1, [&](int64_t t, int64_t) {
    size_t* cursor = next.data() + static_cast<size_t>(t) * buckets;
    ForEachSlice(starts, thread_begin(t), thread_begin(t + 1), [&](size_t u, size_t k0, size_t k1) {
      const int64_t* ids = values[u]->indices.data();
      DispatchDType(values[u]->dtype, [&](auto tag) {
        using In = typename decltype(tag)::type;
        const In* in = reinterpret_cast<const In*>(values[u]->values.data());
        for (size_t k = k0; k < k1; ++k) {
          const uint64_t index = static_cast<uint64_t>(ids[k]);
          out[cursor[index >> bucket_bits]++] = make_entry(u, index, in[k]);
        }
      });
    });
  });
  return partition;
}

// Stable LSD radix sort of one shard's entries (anything with an unsigned `index`) by
// their offset in the shard (the index's low `offset_bits` bits), with equal passes of at
// most 8 bits (256 counters, in L1); a pass whose digit is the same for every entry is
// skipped. `scratch` has room for n entries. Returns where the sorted entries ended up:
// `entries` or `scratch`. Stable: entries of one coordinate keep their batch order.
template <typename Entry>
const Entry* SortByOffset(Entry* entries, Entry* scratch, size_t n, int offset_bits) {
  constexpr int kMaxDigitBits = 8;
  if (n < 2 || offset_bits == 0) return entries;
  const int passes = (offset_bits + kMaxDigitBits - 1) / kMaxDigitBits;
  const int digit_bits = (offset_bits + passes - 1) / passes;
  const uint64_t digit_mask = (uint64_t{1} << digit_bits) - 1;
  size_t offsets[(size_t{1} << kMaxDigitBits) + 1];
  for (int shift = 0; shift < offset_bits; shift += digit_bits) {
    auto digit = [&](const Entry& e) { return static_cast<size_t>((e.index >> shift) & digit_mask); };
    std::fill(offsets, offsets + digit_mask + 2, size_t{0});
    for (size_t i = 0; i < n; ++i) ++offsets[digit(entries[i]) + 1];
    if (offsets[digit(entries[0]) + 1] == n) continue;
    for (size_t d = 0; d <= digit_mask; ++d) offsets[d + 1] += offsets[d];
    for (size_t i = 0; i < n; ++i) scratch[offsets[digit(entries[i])]++] = entries[i];
    std::swap(entries, scratch);
  }
  return entries;
}

}  // namespace fedagg::cpu

#endif  // FEDAGG_SERVICE_CORE_CPU_COORDINATE_PARTITION_H_
