// ExactSparseUnion: the state of a deterministic aggregation's sparse_sum_sparse field
// (exact_field_accumulator.h) — the union of the coordinates its updates sent, each with
// the exact sum (exact_sums.h) of the values sent for it and the number of updates that
// sent one. Kept as the float union keeps its state (cpu_sparse_union_accumulator.h): in
// shards of 2^shard_bits coordinates, each sorted and coalesced. A batch is partitioned by
// shard (cpu_coordinate_partition.h, one stable pass) and the shards are worked on in
// parallel over the thread pool: each sorts its entries by coordinate (a radix sort), adds
// the values of coordinates it holds in place, and merges new coordinates in from the
// back, so that once a round's coordinates have been seen a batch moves no state at all.
// Exact sums do not depend on the order of their additions, so neither does the state: it
// is the same, to the bit, whatever the batching, the threads or the order of merges.
#ifndef FEDAGG_SERVICE_CORE_EXACT_SPARSE_UNION_H_
#define FEDAGG_SERVICE_CORE_EXACT_SPARSE_UNION_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "service/core/byte_codec.h"
#include "service/core/exact_sums.h"
#include "service/core/field_value.h"
#include "service/core/thread_pool.h"

namespace fedagg {

class ExactSparseUnion {
 public:
  // A union over coordinates [0, rows), its sums on `grid`.
  ExactSparseUnion(int64_t rows, ExactSums::Grid grid, ThreadPool& pool);

  // Adds a batch of updates: every value exactly (validated: finite, indices < rows), and
  // one count for each coordinate an update sends, however often it repeats it.
  void AddBatch(absl::Span<const FieldValue* const> values);
  // This ∪= other (same rows and grid): sums added, counts summed.
  void MergeWith(const ExactSparseUnion& other);

  // The partial-aggregate format's layout, in coordinate order: the indices (their u64
  // count, then each), the sums' words (the count of words, then each) and the counts.
  void SerializeTo(ByteWriter& out) const;
  // Reads what SerializeTo wrote, replacing the state. DATA_LOSS (naming `what`) for
  // indices out of range or not increasing, counts outside [1, contributions], or short
  // input; on error the state is unchanged.
  absl::Status DeserializeFrom(ByteReader& in, int64_t contributions, absl::string_view what);

  // One shard's coordinates, in increasing order, with their sums and counts.
  struct Piece {
    absl::Span<const int64_t> indices;
    const ExactSums* sums;
    absl::Span<const int64_t> counts;
  };
  // The shards that hold coordinates, in coordinate order.
  std::vector<Piece> Pieces() const;
  // Coordinates held.
  size_t size() const;
  uint64_t MemoryBytes() const;

  // One shard's state: strictly increasing indices, one sum and count each.
  struct Shard {
    explicit Shard(ExactSums::Grid grid) : sums(grid, 0) {}
    // What cpu::MergeIntoShard (union_shards.h) asks of a shard's sums.
    void ResizeValues(size_t n) { sums.Resize(static_cast<int64_t>(n)); }
    void CopyValue(size_t i, const Shard& other, size_t j) {
      sums.Copy(static_cast<int64_t>(i), other.sums, static_cast<int64_t>(j));
    }
    // Appends a sum of 0; returns its position.
    size_t AppendZero() {
      const int64_t i = sums.size();
      sums.Resize(i + 1);
      return static_cast<size_t>(i);
    }
    std::vector<int64_t> indices;
    ExactSums sums;
    std::vector<int64_t> counts;
  };

 private:
  int64_t rows_;
  ExactSums::Grid grid_;
  ThreadPool& pool_;
  int shard_bits_;
  std::vector<Shard> shards_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_EXACT_SPARSE_UNION_H_
