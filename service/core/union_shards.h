// What the sparse-result unions keep in common, the float one
// (cpu_sparse_union_accumulator.h) and the exact one of deterministic aggregations
// (exact_sparse_union.h): their state is cut into shards of coordinates, each sorted and
// coalesced, worked on in parallel; here are the shards' size, the loop that spreads them
// over the threads, and the merge of a sorted source (a shard's part of a batch, or
// another union's shard) into a shard.
#ifndef FEDAGG_SERVICE_CORE_UNION_SHARDS_H_
#define FEDAGG_SERVICE_CORE_UNION_SHARDS_H_

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "service/core/thread_pool.h"

namespace fedagg::cpu {

// The shards of a sparse-result union over `rows` coordinates: 2^UnionShardBits
// coordinates each, at least 2^12 (smaller shards would be mostly empty or cost more in
// per-shard overhead than they save) and at most 2^10 of them (the partition pass writes
// to every shard at once, and more write streams than that no longer fit the L1 cache and
// the TLB).
inline int UnionShardBits(int64_t rows) {
  constexpr int kMaxShardFanoutBits = 10;
  constexpr int kMinShardBits = 12;
  const int rows_bits = std::bit_width(static_cast<uint64_t>(std::max<int64_t>(rows - 1, 0)));
  return std::min(rows_bits, std::max(kMinShardBits, rows_bits - kMaxShardFanoutBits));
}
inline size_t UnionShardCount(int64_t rows, int shard_bits) {
  return rows <= 1 ? 1 : static_cast<size_t>(((rows - 1) >> shard_bits) + 1);
}

// Calls fn(shard, local) for shards [0, shards), spread over `threads` threads of the
// pool, each thread taking the next shard when it is done with one; make_local() makes
// each thread's working state (its scratch), passed as `local`.
template <typename MakeLocal, typename Fn>
void ForEachShard(size_t shards, int threads, ThreadPool& pool, MakeLocal&& make_local, Fn&& fn) {
  std::atomic<size_t> next_shard{0};
  pool.ParallelFor(threads, 1, [&](int64_t, int64_t) {
    auto local = make_local();
    for (size_t s; (s = next_shard.fetch_add(1, std::memory_order_relaxed)) < shards;) fn(s, local);
  });
}

// state = state ∪ source: where a coordinate is in both, the source's values are added
// to the state's and the counts summed. `source_size` bounds how many coordinates the
// source has. Coordinates the state holds are added in place, in one walk; new ones are
// gathered in `added` (the thread's scratch, its capacity reused) and then merged in from
// the back, moving only the state entries above the first new coordinate: once a round's
// coordinates have all been seen, batches rewrite nothing but values and counts.
//
// A Shard has `indices` and `counts` (vectors of int64_t, one per coordinate held,
// indices strictly increasing) and values it manages itself: ResizeValues(n) (to n
// values; the merge writes every new one) and CopyValue(i, other, j) (value i = other's
// value j; `other` may be this shard, with i != j). A Source gives its coordinates in
// increasing order: done(), index() of the next one, AddTo(shard, i), which adds the
// next coordinate's values into the shard's value i and returns how many updates sent it,
// and Append(shard), which appends them as the shard's last value (its indices and counts
// are the merge's) and returns the same; both move past the coordinate.
template <typename Shard, typename Source>
void MergeIntoShard(Shard& state, Source& source, size_t source_size, Shard& added) {
  added.indices.clear();
  added.counts.clear();
  added.ResizeValues(0);
  const int64_t* const state_indices = state.indices.data();
  const size_t state_size = state.indices.size();
  // A source much smaller than the state finds its coordinates by binary search.
  const bool search = state_size > 8 * source_size;
  size_t a = 0;
  while (!source.done()) {
    const int64_t index = source.index();
    if (search) {
      a = static_cast<size_t>(std::lower_bound(state_indices + a, state_indices + state_size, index) - state_indices);
    } else {
      while (a < state_size && state_indices[a] < index) ++a;
    }
    if (a < state_size && state_indices[a] == index) {
      state.counts[a] += source.AddTo(state, a);
      ++a;
      continue;
    }
    added.indices.push_back(index);
    added.counts.push_back(source.Append(added));
  }
  if (added.indices.empty()) return;
  const size_t merged_size = state_size + added.indices.size();
  state.indices.resize(merged_size);
  state.counts.resize(merged_size);
  state.ResizeValues(merged_size);
  // Backward merge of two sorted runs with no coordinate in common.
  size_t from_state = state_size, from_added = added.indices.size(), to = merged_size;
  while (from_added > 0) {
    --to;
    if (from_state > 0 && state.indices[from_state - 1] > added.indices[from_added - 1]) {
      --from_state;
      state.indices[to] = state.indices[from_state];
      state.counts[to] = state.counts[from_state];
      state.CopyValue(to, state, from_state);
    } else {
      --from_added;
      state.indices[to] = added.indices[from_added];
      state.counts[to] = added.counts[from_added];
      state.CopyValue(to, added, from_added);
    }
  }
}

}  // namespace fedagg::cpu

#endif  // FEDAGG_SERVICE_CORE_UNION_SHARDS_H_
