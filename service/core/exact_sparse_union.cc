// The sharded exact union of a deterministic sparse_sum_sparse field (exact_sparse_union.h).
#include "service/core/exact_sparse_union.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "service/core/cpu_coordinate_partition.h"
#include "service/core/cpu_kernels.h"
#include "service/core/large_allocation.h"
#include "service/core/union_shards.h"

namespace fedagg {
namespace {

// One entry of a batch: its coordinate, its update's position in the batch (an update is
// counted once per coordinate however often it repeats it) and its value, exactly as a
// float64.
struct Entry {
  uint64_t index;
  uint32_t update;
  double value;
};

// The sources cpu::MergeIntoShard merges into a shard (union_shards.h).

// A shard's part of a batch, sorted by coordinate: each of a coordinate's values added
// exactly, each update that sent it counted once.
class SortedEntries {
 public:
  SortedEntries(const Entry* entries, size_t n) : entries_(entries), n_(n) {}
  bool done() const { return i_ == n_; }
  int64_t index() const { return static_cast<int64_t>(entries_[i_].index); }
  int64_t AddTo(ExactSparseUnion::Shard& shard, size_t i) {
    const uint64_t index = entries_[i_].index;
    int64_t updates = 0;
    for (size_t first = i_; i_ < n_ && entries_[i_].index == index; ++i_) {
      shard.sums.Add(static_cast<int64_t>(i), entries_[i_].value);
      if (i_ == first || entries_[i_].update != entries_[i_ - 1].update) ++updates;
    }
    return updates;
  }
  int64_t Append(ExactSparseUnion::Shard& shard) { return AddTo(shard, shard.AppendZero()); }

 private:
  const Entry* entries_;
  size_t n_;
  size_t i_ = 0;
};

// Another union's shard.
class ShardEntries {
 public:
  explicit ShardEntries(const ExactSparseUnion::Shard& shard) : shard_(shard) {}
  bool done() const { return i_ == shard_.indices.size(); }
  int64_t index() const { return shard_.indices[i_]; }
  int64_t AddTo(ExactSparseUnion::Shard& shard, size_t i) {
    shard.sums.AddSum(static_cast<int64_t>(i), shard_.sums, static_cast<int64_t>(i_));
    return shard_.counts[i_++];
  }
  int64_t Append(ExactSparseUnion::Shard& shard) { return AddTo(shard, shard.AppendZero()); }

 private:
  const ExactSparseUnion::Shard& shard_;
  size_t i_ = 0;
};

}  // namespace

ExactSparseUnion::ExactSparseUnion(int64_t rows, ExactSums::Grid grid, ThreadPool& pool)
    : rows_(rows),
      grid_(grid),
      pool_(pool),
      shard_bits_(cpu::UnionShardBits(rows)),
      shards_(cpu::UnionShardCount(rows, shard_bits_), Shard(grid)) {}

void ExactSparseUnion::AddBatch(absl::Span<const FieldValue* const> values) {
  size_t total = 0;
  for (const FieldValue* value : values) total += value->indices.size();
  if (total == 0) return;
  const int threads = total < cpu::kMinEntriesToSplit ? 1 : pool_.threads();
  // The partitioned entries, then as much again for the sorts (each shard sorts within
  // its own range of both halves).
  LargeAllocation buffer(2 * total * sizeof(Entry));
  Entry* const entries = reinterpret_cast<Entry*>(buffer.data());
  Entry* const scratch = entries + total;
  const cpu::CoordinatePartition partition = cpu::PartitionByCoordinate(
      values, shard_bits_, shards_.size(), threads, pool_, entries, [](size_t u, uint64_t index, auto in) {
        return Entry{index, static_cast<uint32_t>(u), cpu::Widen<double>(in)};
      });
  cpu::ForEachShard(shards_.size(), threads, pool_, [this] { return Shard(grid_); }, [&](size_t s, Shard& added) {
    const size_t begin = partition.bucket_start[s];
    const size_t n = partition.bucket_start[s + 1] - begin;
    if (n == 0) return;
    SortedEntries sorted(cpu::SortByOffset(entries + begin, scratch + begin, n, shard_bits_), n);
    cpu::MergeIntoShard(shards_[s], sorted, n, added);
  });
}

void ExactSparseUnion::MergeWith(const ExactSparseUnion& other) {
  const int threads = size() + other.size() < cpu::kMinEntriesToSplit ? 1 : pool_.threads();
  cpu::ForEachShard(shards_.size(), threads, pool_, [this] { return Shard(grid_); }, [&](size_t s, Shard& added) {
    const Shard& from = other.shards_[s];
    if (from.indices.empty()) return;
    ShardEntries source(from);
    cpu::MergeIntoShard(shards_[s], source, from.indices.size(), added);
  });
}

void ExactSparseUnion::SerializeTo(ByteWriter& out) const {
  const uint64_t nnz = size();
  out.Put<uint64_t>(nnz);
  for (const Shard& shard : shards_) out.PutElements(shard.indices.data(), shard.indices.size());
  out.Put<uint64_t>(nnz * static_cast<uint64_t>(ExactSums::WordsOf(grid_)));
  for (const Shard& shard : shards_) shard.sums.PutWords(out);
  out.Put<uint64_t>(nnz);
  for (const Shard& shard : shards_) out.PutElements(shard.counts.data(), shard.counts.size());
}

absl::Status ExactSparseUnion::DeserializeFrom(ByteReader& in, int64_t contributions, absl::string_view what) {
  uint64_t nnz = 0;
  if (absl::Status s = in.Get(&nnz); !s.ok()) return s;
  if (nnz > static_cast<uint64_t>(rows_)) {
    return absl::DataLossError(absl::StrCat("partial aggregate: ", what, " has ", nnz, " entries but only ", rows_,
                                            " coordinates"));
  }
  // Bound the allocations by what the input can hold before making room: an index and a
  // sum for every entry.
  const uint64_t words = static_cast<uint64_t>(ExactSums::WordsOf(grid_));
  if (absl::Status s = in.CheckRemaining(nnz, sizeof(int64_t) + words * sizeof(uint64_t)); !s.ok()) return s;
  // The indices come a block at a time, each into its shard; the sums and counts, in the
  // same order, fill each shard in turn.
  constexpr uint64_t kIndexBlock = 1 << 16;
  std::vector<Shard> shards(shards_.size(), Shard(grid_));
  std::vector<int64_t> block(static_cast<size_t>(std::min(nnz, kIndexBlock)));
  int64_t previous = -1;
  for (uint64_t k = 0; k < nnz;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(block.size(), nnz - k));
    if (absl::Status s = in.GetElements(block.data(), n); !s.ok()) return s;
    for (size_t i = 0; i < n; ++i, ++k) {
      const int64_t index = block[i];
      if (index <= previous || index >= rows_) {
        return absl::DataLossError(absl::StrCat("partial aggregate: ", what, " has index ", index, " at position ", k,
                                                ", out of range or not increasing"));
      }
      shards[static_cast<size_t>(index >> shard_bits_)].indices.push_back(index);
      previous = index;
    }
  }
  if (absl::Status s = in.GetCountExact(nnz * words, absl::StrCat(what, " sums")); !s.ok()) return s;
  for (Shard& shard : shards) {
    shard.sums.Resize(static_cast<int64_t>(shard.indices.size()));
    if (absl::Status s = shard.sums.GetWords(in); !s.ok()) return s;
  }
  if (absl::Status s = in.GetCountExact(nnz, absl::StrCat(what, " counts")); !s.ok()) return s;
  for (Shard& shard : shards) {
    shard.counts.resize(shard.indices.size());
    if (absl::Status s = in.GetElements(shard.counts.data(), shard.counts.size()); !s.ok()) return s;
    for (const int64_t count : shard.counts) {
      if (count < 1 || count > contributions) {
        return absl::DataLossError(absl::StrCat("partial aggregate: ", what, " has a count of ", count, " with ",
                                                contributions, " contributions"));
      }
    }
  }
  shards_ = std::move(shards);
  return absl::OkStatus();
}

std::vector<ExactSparseUnion::Piece> ExactSparseUnion::Pieces() const {
  std::vector<Piece> pieces;
  for (const Shard& shard : shards_) {
    if (!shard.indices.empty()) pieces.push_back({shard.indices, &shard.sums, shard.counts});
  }
  return pieces;
}

size_t ExactSparseUnion::size() const {
  size_t nnz = 0;
  for (const Shard& shard : shards_) nnz += shard.indices.size();
  return nnz;
}

uint64_t ExactSparseUnion::MemoryBytes() const {
  uint64_t bytes = shards_.capacity() * sizeof(Shard);
  for (const Shard& shard : shards_) {
    bytes += (shard.indices.capacity() + shard.counts.capacity()) * sizeof(int64_t) + shard.sums.MemoryBytes();
  }
  return bytes;
}

}  // namespace fedagg
