// ClientIdSet and ClientIdList: see client_id_set.h.
#include "service/rounds/client_id_set.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace fedagg {

namespace client_id_set_internal {

// Ids arrive in protobuf strings (under 2 GiB), so a u32 holds every length.
using IdLength = uint32_t;

absl::string_view IdOf(Record record) {
  IdLength length = 0;
  std::memcpy(&length, record.at, sizeof(length));
  return absl::string_view(record.at + sizeof(length), length);
}

}  // namespace client_id_set_internal

namespace {

using client_id_set_internal::Block;
using client_id_set_internal::ErasedIds;
using client_id_set_internal::IdLength;
using client_id_set_internal::Record;

size_t RecordBytes(absl::string_view id) { return sizeof(IdLength) + id.size(); }

// Calls `visit` with each record of `bytes` (the used bytes of a block) that `erased`
// does not name.
void ForEachIn(const char* bytes, size_t used, const ErasedIds* erased, absl::FunctionRef<void(Record)> visit) {
  for (size_t at = 0; at < used;) {
    const Record record{bytes + at};
    at += RecordBytes(IdOf(record));
    if (erased == nullptr || !erased->contains(record.at)) visit(record);
  }
}

}  // namespace

void ClientIdList::ForEach(absl::FunctionRef<void(absl::string_view)> visit) const {
  for (const Span& span : spans_) {
    ForEachIn(span.block->bytes.get(), span.used, erased_.get(), [&](Record record) { visit(IdOf(record)); });
  }
}

std::vector<std::string> ClientIdList::ToVector() const {
  std::vector<std::string> ids;
  ids.reserve(size_);
  ForEach([&](absl::string_view id) { ids.emplace_back(id); });
  return ids;
}

ClientIdSet::ClientIdSet(const ClientIdList& list)
    : blocks_(list.spans_),
      erased_(list.erased_ == nullptr ? nullptr : std::make_shared<ErasedIds>(*list.erased_)) {
  index_.reserve(list.size());
  for (const ClientIdList::Span& span : blocks_) {
    block_bytes_ += span.block->capacity;
    ForEachIn(span.block->bytes.get(), span.used, erased_.get(), [&](Record record) {
      index_.insert(record);
      live_bytes_ += RecordBytes(IdOf(record));
    });
  }
  if (erased_ != nullptr) {
    for (const char* record : *erased_) erased_bytes_ += RecordBytes(IdOf(Record{record}));
  }
}

ClientIdSet& ClientIdSet::operator=(ClientIdSet&& other) noexcept {
  if (this == &other) return *this;
  blocks_ = std::exchange(other.blocks_, {});
  tail_ = std::exchange(other.tail_, nullptr);
  block_bytes_ = std::exchange(other.block_bytes_, 0);
  index_ = std::exchange(other.index_, {});
  erased_ = std::exchange(other.erased_, nullptr);
  erased_shared_ = std::exchange(other.erased_shared_, false);
  erased_bytes_ = std::exchange(other.erased_bytes_, 0);
  live_bytes_ = std::exchange(other.live_bytes_, 0);
  return *this;
}

bool ClientIdSet::insert(absl::string_view id) {
  MakeRoom(RecordBytes(id));
  bool inserted = false;
  index_.lazy_emplace(id, [&](const auto& construct) {  // one lookup; the record made only when new
    construct(Append(id));
    inserted = true;
  });
  if (inserted) live_bytes_ += RecordBytes(id);
  return inserted;
}

bool ClientIdSet::erase(absl::string_view id) {
  auto it = index_.find(id);
  if (it == index_.end()) return false;
  MutableErased().insert(it->at);
  index_.erase(it);
  live_bytes_ -= RecordBytes(id);
  erased_bytes_ += RecordBytes(id);
  CompactIfMostlyErased();
  return true;
}

ClientIdList ClientIdSet::Snapshot() const {
  ClientIdList list;
  list.spans_ = blocks_;
  list.erased_ = erased_;
  erased_shared_ = erased_ != nullptr;
  list.size_ = index_.size();
  return list;
}

size_t ClientIdSet::memory_bytes() const {
  size_t bytes = block_bytes_ + blocks_.capacity() * sizeof(ClientIdList::Span) +
                 index_.capacity() * (sizeof(Record) + 1);
  if (erased_ != nullptr) bytes += erased_->capacity() * (sizeof(const char*) + 1);
  return bytes;
}

void ClientIdSet::MakeRoom(size_t bytes) {
  if (tail_ != nullptr && tail_->capacity - blocks_.back().used >= bytes) return;
  // Blocks double up to 1 MiB: a small aggregation holds a page, a large one wastes at
  // most a block's unused end; an id larger than that gets a block of its own.
  const size_t grown =
      blocks_.empty() ? kFirstBlockBytes : std::min(kLargestBlockBytes, 2 * blocks_.back().block->capacity);
  auto block = std::make_shared<Block>(std::max(grown, bytes));
  Block* writable = block.get();
  blocks_.push_back(ClientIdList::Span{std::move(block), 0});
  tail_ = writable;
  block_bytes_ += writable->capacity;
}

Record ClientIdSet::Append(absl::string_view id) {
  size_t& used = blocks_.back().used;
  char* at = tail_->bytes.get() + used;
  const auto length = static_cast<IdLength>(id.size());
  std::memcpy(at, &length, sizeof(length));
  std::memcpy(at + sizeof(length), id.data(), id.size());
  used += RecordBytes(id);
  return Record{at};
}

void ClientIdSet::CompactIfMostlyErased() {
  if (erased_bytes_ <= live_bytes_ || erased_bytes_ < kFirstBlockBytes) return;
  ClientIdSet compact;
  compact.index_.reserve(index_.size());
  // In insertion order, so that lists taken before and after agree on it.
  Snapshot().ForEach([&](absl::string_view id) { compact.insert(id); });
  *this = std::move(compact);
}

client_id_set_internal::ErasedIds& ClientIdSet::MutableErased() {
  // A list taken keeps seeing the ids erased when it was taken, no more.
  if (erased_ == nullptr || erased_shared_) {
    erased_ = std::make_shared<ErasedIds>(erased_ == nullptr ? ErasedIds() : *erased_);
    erased_shared_ = false;
  }
  return *erased_;
}

}  // namespace fedagg
