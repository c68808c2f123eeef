// CPU accumulator for sparse_sum_sparse (sharded, sorted, coalesced union; see the header).
#include "service/core/cpu_sparse_union_accumulator.h"

#include <algorithm>
#include <memory>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "service/core/cpu_coordinate_partition.h"
#include "service/core/cpu_kernels.h"
#include "service/core/field_report.h"
#include "service/core/large_allocation.h"
#include "service/core/status_macros.h"
#include "service/core/union_shards.h"

namespace fedagg {
namespace {

// One entry of a batch: its coordinate, its update's position in the batch (an update is
// counted once per coordinate however often it repeats it) and its widened value.
template <typename Acc>
struct Entry {
  uint64_t index;
  uint32_t update;
  Acc value;
};

// What MergeShard merges into a shard, one coalesced coordinate at a time, in increasing
// order of coordinate: done(), index() of the next one, and Take(value, count), which
// gives its value and count and moves past it.

// A shard's part of a batch, sorted by coordinate: a coordinate's entries are summed in
// batch order, and counted once per update.
template <typename Acc>
class SortedEntries {
 public:
  SortedEntries(const Entry<Acc>* entries, size_t n) : entries_(entries), n_(n) {}
  bool done() const { return i_ == n_; }
  int64_t index() const { return static_cast<int64_t>(entries_[i_].index); }
  void Take(Acc& value, int64_t& count) {
    const uint64_t index = entries_[i_].index;
    value = Acc{0};
    count = 0;
    uint32_t last_update = 0;
    for (; i_ < n_ && entries_[i_].index == index; ++i_) {
      value = cpu::Add(value, entries_[i_].value);
      if (count == 0 || entries_[i_].update != last_update) ++count;
      last_update = entries_[i_].update;
    }
  }

 private:
  const Entry<Acc>* entries_;
  size_t n_;
  size_t i_ = 0;
};

// A shard's part of a batch, coalesced in a table of one slot per coordinate of the shard
// (small enough to stay in a core's L2 cache) instead of sorted: each entry, in batch
// order, is added into its slot, and a bitmap marks the slots in use, which are then
// read back in coordinate order. Sums and counts are those of SortedEntries, bit for bit.
// Used where the table fits and the entries are dense enough in the shard that walking
// the bitmap costs less than sorting.
template <typename Acc>
class SlotTable {
 public:
  // The widest shard whose slots are at most kMaxBytes.
  static constexpr size_t kMaxBytes = size_t{512} << 10;
  static bool Fits(int shard_bits) { return (sizeof(Slot) << shard_bits) <= kMaxBytes; }
  // Worth it when there is an entry per 64 coordinates (one bitmap word) or more.
  static bool Pays(size_t entries, int shard_bits) { return entries * 64 >= (size_t{1} << shard_bits); }

  explicit SlotTable(int shard_bits)
      : mask_((uint64_t{1} << shard_bits) - 1), slots_(size_t{1} << shard_bits),
        in_use_(((size_t{1} << shard_bits) + 63) / 64) {}

  // Adds a shard's entries (in batch order); every slot must be free.
  void Fill(const Entry<Acc>* entries, size_t n, int64_t shard_base) {
    base_ = shard_base;
    for (size_t i = 0; i < n; ++i) {
      const size_t offset = static_cast<size_t>(entries[i].index & mask_);
      Slot& slot = slots_[offset];
      uint64_t& word = in_use_[offset / 64];
      const uint64_t bit = uint64_t{1} << (offset % 64);
      if (!(word & bit)) {
        word |= bit;
        slot = Slot{cpu::Add(Acc{0}, entries[i].value), entries[i].update, 1};
        continue;
      }
      slot.value = cpu::Add(slot.value, entries[i].value);
      if (slot.last_update != entries[i].update) ++slot.count;
      slot.last_update = entries[i].update;
    }
    word_ = 0;
    Advance();
  }

  // Merge source over the slots in use, freeing each as it is taken.
  bool done() const { return word_ == in_use_.size(); }
  int64_t index() const { return base_ + static_cast<int64_t>(word_ * 64) + std::countr_zero(in_use_[word_]); }
  void Take(Acc& value, int64_t& count) {
    const size_t offset = word_ * 64 + static_cast<size_t>(std::countr_zero(in_use_[word_]));
    value = slots_[offset].value;
    count = slots_[offset].count;
    in_use_[word_] &= in_use_[word_] - 1;
    Advance();
  }

 private:
  struct Slot {
    Acc value;
    uint32_t last_update;
    int64_t count;
  };
  void Advance() {
    while (word_ < in_use_.size() && in_use_[word_] == 0) ++word_;
  }

  const uint64_t mask_;
  std::vector<Slot> slots_;
  std::vector<uint64_t> in_use_;
  int64_t base_ = 0;
  size_t word_ = 0;
};

// Another accumulator's shard.
template <typename Shard>
class ShardEntries {
 public:
  explicit ShardEntries(const Shard& shard) : shard_(shard) {}
  bool done() const { return i_ == shard_.indices.size(); }
  int64_t index() const { return shard_.indices[i_]; }
  template <typename Acc>
  void Take(Acc& value, int64_t& count) {
    value = shard_.values[i_];
    count = shard_.counts[i_];
    ++i_;
  }

 private:
  const Shard& shard_;
  size_t i_ = 0;
};

// A source of coalesced coordinates, each taken as one value and count (Take), as
// cpu::MergeIntoShard wants it: a coordinate the state holds has its value added to the
// state's (the state's first); a new one's value is appended as it is.
template <typename Acc, typename Taker>
class TakenValues {
 public:
  explicit TakenValues(Taker& taker) : taker_(taker) {}
  bool done() const { return taker_.done(); }
  int64_t index() const { return taker_.index(); }
  template <typename Shard>
  int64_t AddTo(Shard& shard, size_t i) {
    Acc value;
    int64_t count;
    taker_.Take(value, count);
    shard.values[i] = cpu::Add(shard.values[i], value);
    return count;
  }
  template <typename Shard>
  int64_t Append(Shard& shard) {
    Acc value;
    int64_t count;
    taker_.Take(value, count);
    shard.values.push_back(value);
    return count;
  }

 private:
  Taker& taker_;
};

// state = state ∪ what `taker` gives (cpu::MergeIntoShard).
template <typename Acc, typename Shard, typename Taker>
void MergeShard(Shard& state, Taker&& taker, size_t taker_size, Shard& added) {
  TakenValues<Acc, std::remove_reference_t<Taker>> source(taker);
  cpu::MergeIntoShard(state, source, taker_size, added);
}

}  // namespace

template <typename Acc>
CpuSparseUnionAccumulator<Acc>::CpuSparseUnionAccumulator(const FieldSpec& field, ThreadPool& pool)
    : field_(field), pool_(pool), shard_bits_(cpu::UnionShardBits(field.rows)),
      shards_(cpu::UnionShardCount(field.rows, shard_bits_)) {}

template <typename Acc>
absl::Status CpuSparseUnionAccumulator<Acc>::AccumulateBatch(absl::Span<const FieldValue* const> values,
                                                             absl::Span<const double>) {
  size_t total = 0;
  for (const FieldValue* value : values) total += value->indices.size();
  if (total == 0) return absl::OkStatus();
  const int threads = total < cpu::kMinEntriesToSplit ? 1 : pool_.threads();
  // The partitioned entries, then as much again for the sorts (each shard sorts within
  // its own range of both halves).
  LargeAllocation buffer(2 * total * sizeof(Entry<Acc>));
  Entry<Acc>* const entries = reinterpret_cast<Entry<Acc>*>(buffer.data());
  Entry<Acc>* const scratch = entries + total;
  const cpu::CoordinatePartition partition = cpu::PartitionByCoordinate(
      values, shard_bits_, shards_.size(), threads, pool_, entries, [](size_t u, uint64_t index, auto in) {
        return Entry<Acc>{index, static_cast<uint32_t>(u), cpu::Widen<Acc>(in)};
      });
  // A thread's scratch: MergeShard's, and a slot table, made where the first shard that
  // pays for one is met.
  struct Local {
    Shard added;
    std::unique_ptr<SlotTable<Acc>> table;
  };
  cpu::ForEachShard(shards_.size(), threads, pool_, [] { return Local(); }, [&](size_t s, Local& local) {
    const size_t begin = partition.bucket_start[s];
    const size_t n = partition.bucket_start[s + 1] - begin;
    if (n == 0) return;
    if (SlotTable<Acc>::Fits(shard_bits_) && SlotTable<Acc>::Pays(n, shard_bits_)) {
      if (local.table == nullptr) local.table = std::make_unique<SlotTable<Acc>>(shard_bits_);
      local.table->Fill(entries + begin, n, static_cast<int64_t>(s) << shard_bits_);
      MergeShard<Acc>(shards_[s], *local.table, n, local.added);
    } else {
      const Entry<Acc>* sorted = cpu::SortByOffset(entries + begin, scratch + begin, n, shard_bits_);
      MergeShard<Acc>(shards_[s], SortedEntries<Acc>(sorted, n), n, local.added);
    }
  });
  return absl::OkStatus();
}

template <typename Acc>
absl::Status CpuSparseUnionAccumulator<Acc>::MergeWith(const FieldAccumulator& other_base) {
  const auto& other = static_cast<const CpuSparseUnionAccumulator<Acc>&>(other_base);
  const int threads = Nonzeros() + other.Nonzeros() < cpu::kMinEntriesToSplit ? 1 : pool_.threads();
  cpu::ForEachShard(shards_.size(), threads, pool_, [] { return Shard(); }, [&](size_t s, Shard& added) {
    const Shard& from = other.shards_[s];
    if (from.indices.empty()) return;
    MergeShard<Acc>(shards_[s], ShardEntries<Shard>(from), from.indices.size(), added);
  });
  return absl::OkStatus();
}

template <typename Acc>
absl::Status CpuSparseUnionAccumulator<Acc>::SerializeTo(ByteWriter& out) const {
  const uint64_t nnz = Nonzeros();
  out.Put<uint64_t>(nnz);
  for (const Shard& shard : shards_) out.PutElements(shard.indices.data(), shard.indices.size());
  out.Put<uint64_t>(nnz);
  for (const Shard& shard : shards_) out.PutElements(shard.values.data(), shard.values.size());
  out.Put<uint64_t>(nnz);
  for (const Shard& shard : shards_) out.PutElements(shard.counts.data(), shard.counts.size());
  return absl::OkStatus();
}

template <typename Acc>
absl::Status CpuSparseUnionAccumulator<Acc>::DeserializeFrom(ByteReader& in, int64_t contributions) {
  const std::string what = absl::StrCat("field '", field_.path, "'");
  uint64_t nnz = 0;
  FEDAGG_RETURN_IF_ERROR(in.Get(&nnz));
  // Bound the allocation by what the input can hold before making room.
  FEDAGG_RETURN_IF_ERROR(in.CheckRemaining(nnz, sizeof(int64_t)));
  if (nnz > static_cast<uint64_t>(field_.rows)) {
    return absl::DataLossError(absl::StrCat("partial aggregate: ", what, " has ", nnz,
                                            " entries but only ", field_.rows, " coordinates"));
  }
  // Each array goes straight into the shards (the input may be a stream being received:
  // only the decoded state is held). The indices come a block at a time; the values and
  // counts, in the same order, fill each shard in turn.
  constexpr uint64_t kIndexBlock = 1 << 16;
  std::vector<Shard> shards(shards_.size());
  std::vector<int64_t> block(static_cast<size_t>(std::min(nnz, kIndexBlock)));
  int64_t previous = -1;
  for (uint64_t k = 0; k < nnz;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(block.size(), nnz - k));
    FEDAGG_RETURN_IF_ERROR(in.GetElements(block.data(), n));
    for (size_t i = 0; i < n; ++i, ++k) {
      const int64_t index = block[i];
      if (index <= previous || index >= field_.rows) {
        return absl::DataLossError(absl::StrCat("partial aggregate: ", what, " index ", index,
                                                " at entry ", k,
                                                " is out of range or not strictly increasing"));
      }
      shards[static_cast<size_t>(index >> shard_bits_)].indices.push_back(index);
      previous = index;
    }
  }
  FEDAGG_RETURN_IF_ERROR(in.GetCountExact(nnz, what + " values"));
  for (Shard& shard : shards) {
    shard.values.resize(shard.indices.size());
    FEDAGG_RETURN_IF_ERROR(in.GetElements(shard.values.data(), shard.values.size()));
  }
  FEDAGG_RETURN_IF_ERROR(in.GetCountExact(nnz, what + " counts"));
  uint64_t entry = 0;
  for (Shard& shard : shards) {
    shard.counts.resize(shard.indices.size());
    FEDAGG_RETURN_IF_ERROR(in.GetElements(shard.counts.data(), shard.counts.size()));
    for (const int64_t count : shard.counts) {
      if (count < 1 || count > contributions) {
        return absl::DataLossError(absl::StrCat("partial aggregate: ", what, " entry ", entry,
                                                " has count ", count, " with ", contributions,
                                                " contributions"));
      }
      ++entry;
    }
  }
  shards_ = std::move(shards);
  return absl::OkStatus();
}

template <typename Acc>
absl::StatusOr<ReportedField> CpuSparseUnionAccumulator<Acc>::Report(int64_t, double) const {
  std::vector<UnionPiece<Acc>> pieces;
  pieces.reserve(shards_.size());
  for (const Shard& shard : shards_) pieces.push_back({shard.indices, shard.values, shard.counts});
  return ReportUnion<Acc>(field_, pieces);
}

template <typename Acc>
uint64_t CpuSparseUnionAccumulator<Acc>::MemoryBytes() const {
  uint64_t bytes = shards_.capacity() * sizeof(Shard);
  for (const Shard& shard : shards_) {
    bytes += shard.indices.capacity() * sizeof(int64_t) + shard.values.capacity() * sizeof(Acc) +
             shard.counts.capacity() * sizeof(int64_t);
  }
  return bytes;
}

template <typename Acc>
size_t CpuSparseUnionAccumulator<Acc>::Nonzeros() const {
  size_t nnz = 0;
  for (const Shard& shard : shards_) nnz += shard.indices.size();
  return nnz;
}

template class CpuSparseUnionAccumulator<float>;
template class CpuSparseUnionAccumulator<double>;
template class CpuSparseUnionAccumulator<int64_t>;

}  // namespace fedagg
