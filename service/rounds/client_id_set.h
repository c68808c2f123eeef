// ClientIdSet: the client ids an aggregation counted, the memory behind exactly-once
// (docs/PROTOCOL.md 3.5), kept compact for populations of millions: each id's bytes once,
// appended to blocks that never move, and a hash table of 8-byte references to them
// (about 43 bytes an id of 20 characters; docs/BENCHMARKS.md item 58).
// ClientIdList: what a checkpoint writes of the set, taken without copying an id
// (Snapshot shares the blocks), so the aggregation's lock is held for a moment whatever
// the population; it reads the ids in insertion order while the set goes on counting.
// Not thread-safe: the owning Aggregation guards the set with its state lock; a list, once
// taken, is immutable and may be read, and dropped, on any thread.
#ifndef FEDAGG_SERVICE_ROUNDS_CLIENT_ID_SET_H_
#define FEDAGG_SERVICE_ROUNDS_CLIENT_ID_SET_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"

namespace fedagg {

namespace client_id_set_internal {

// A run of ids, each a record: the id's u32 length, then its bytes. Written only by the
// set that made it, and only beyond what any list taken from it reads.
struct Block {
  explicit Block(size_t capacity) : bytes(new char[capacity]), capacity(capacity) {}
  std::unique_ptr<char[]> bytes;
  size_t capacity;
};

// Where an id's record starts in a block: what the set's table holds (8 bytes an id).
struct Record {
  const char* at;
};
absl::string_view IdOf(Record record);

// The table's hash and equality see a record as its id, and look ids up by string_view.
struct RecordHash {
  using is_transparent = void;
  size_t operator()(absl::string_view id) const { return absl::Hash<absl::string_view>()(id); }
  size_t operator()(Record record) const { return (*this)(IdOf(record)); }
};
struct RecordEq {
  using is_transparent = void;
  static absl::string_view View(absl::string_view id) { return id; }
  static absl::string_view View(Record record) { return IdOf(record); }
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return View(a) == View(b);
  }
};

// The records of ids erased from a set while their bytes stay in its blocks.
using ErasedIds = absl::flat_hash_set<const char*>;

}  // namespace client_id_set_internal

class ClientIdList {
 public:
  ClientIdList() = default;  // no ids

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Calls `visit` with each id, in the order they were inserted.
  void ForEach(absl::FunctionRef<void(absl::string_view)> visit) const;
  std::vector<std::string> ToVector() const;

 private:
  friend class ClientIdSet;
  struct Span {
    std::shared_ptr<const client_id_set_internal::Block> block;
    size_t used = 0;
  };
  std::vector<Span> spans_;
  std::shared_ptr<const client_id_set_internal::ErasedIds> erased_;  // null when none
  size_t size_ = 0;
};

class ClientIdSet {
 public:
  ClientIdSet() = default;
  // The ids of `list`, sharing its blocks (a restore holds each id's bytes once).
  explicit ClientIdSet(const ClientIdList& list);
  // A set moved from is empty, and may be used again.
  ClientIdSet(ClientIdSet&& other) noexcept { *this = std::move(other); }
  ClientIdSet& operator=(ClientIdSet&& other) noexcept;

  bool contains(absl::string_view id) const { return index_.contains(id); }
  // False, and nothing changes, when `id` is in the set already.
  bool insert(absl::string_view id);
  // False when `id` is not in the set.
  bool erase(absl::string_view id);
  size_t size() const { return index_.size(); }
  bool empty() const { return index_.empty(); }

  // The ids now in the set, in insertion order; later changes to the set do not show in it.
  ClientIdList Snapshot() const;
  // Bytes the set holds: its blocks (erased ids' bytes included until compacted) and table.
  size_t memory_bytes() const;

 private:
  using Block = client_id_set_internal::Block;

  // A writable block with room for `bytes` more (a new one when the last has not): what
  // may fail to allocate happens before the table takes a slot for the id.
  void MakeRoom(size_t bytes);
  // Writes the id's record into the room MakeRoom made.
  client_id_set_internal::Record Append(absl::string_view id);
  // Copies the ids in the set into fresh blocks, once erased ids hold more bytes than live ones.
  void CompactIfMostlyErased();
  // erased_, to change: this set's own copy.
  client_id_set_internal::ErasedIds& MutableErased();

  static constexpr size_t kFirstBlockBytes = 4096;
  static constexpr size_t kLargestBlockBytes = size_t{1} << 20;

  // Every block with the bytes written to it. A list taken copies these spans.
  std::vector<ClientIdList::Span> blocks_;
  Block* tail_ = nullptr;  // the last block, when this set made it and may append to it
  size_t block_bytes_ = 0;  // the blocks' capacities, summed
  absl::flat_hash_set<client_id_set_internal::Record, client_id_set_internal::RecordHash,
                      client_id_set_internal::RecordEq>
      index_;
  // The erased records; lists taken share it, so once one was taken (erased_shared_) the
  // next erasure changes a copy. A flag, not use_count(): a list dropped on another thread
  // orders nothing with this one.
  std::shared_ptr<client_id_set_internal::ErasedIds> erased_;
  mutable bool erased_shared_ = false;
  size_t erased_bytes_ = 0;
  size_t live_bytes_ = 0;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_ROUNDS_CLIENT_ID_SET_H_
