// LargeAllocation: heap memory for small buffers, mappings for larger ones (2 MiB-aligned
// huge-page candidates from 2 MiB up; pinned, with a pinner), released mappings cached
// for reuse.
#include "service/core/large_allocation.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <iterator>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include "service/core/mutex.h"

namespace fedagg {
namespace {

constexpr size_t kHeapAlignment = 64;

size_t RoundUp(size_t bytes, size_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

// `bytes` (a multiple of kHugePageBytes) mapped at a kHugePageBytes boundary: map one huge
// page more than asked, then unmap the unaligned head and the tail.
std::byte* MapAligned(size_t bytes) {
  const size_t slack = LargeAllocation::kHugePageBytes;
  void* raw = mmap(nullptr, bytes + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = RoundUp(begin, slack);
  if (aligned > begin) munmap(raw, aligned - begin);
  const size_t tail = begin + bytes + slack - (aligned + bytes);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + bytes), tail);
#ifdef MADV_HUGEPAGE
  // Advice only: where THP is unavailable this fails and the pages are ordinary ones.
  madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);
#endif
  return reinterpret_cast<std::byte*>(aligned);
}

// `bytes` (a multiple of the page size) mapped anywhere, for buffers below a huge page;
// null when the kernel refuses (its limit on a process's mappings, vm.max_map_count).
std::byte* MapPages(size_t bytes) {
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return memory == MAP_FAILED ? nullptr : static_cast<std::byte*>(memory);
}

// Buffers below a huge page are mapped in multiples of this.
constexpr size_t kMappedGranule = size_t{64} << 10;

struct Mapping {
  std::byte* memory = nullptr;
  size_t bytes = 0;
  std::shared_ptr<HostMemoryPinner> pinned_by;  // null: not pinned
};

// Unpins (when pinned), then unmaps.
void Unmap(const Mapping& mapping) {
  if (mapping.pinned_by != nullptr) mapping.pinned_by->Unpin(mapping.memory, mapping.bytes);
  munmap(mapping.memory, mapping.bytes);
}

// Released mappings kept for the next allocation of the same size. A fresh mapping costs
// page faults and the kernel's zeroing of every page (and pinning, with a pinner); updates
// of one model all have the same size, so the next one can take the memory the last one
// left, already resident. The kept bytes and the bytes of mappings in use together stay
// within `capacity_` (LargeAllocation::kCachedBytes, beyond what KeepReleasedMappings
// asks): a new mapping makes room among the kept ones first, the oldest unmapped first,
// so kept mappings of sizes no update takes any more never add to what is in use beyond
// the capacity; the newest released one is kept even alone beyond it. A mapping pinned
// otherwise than new ones are (the pinner changed) is unmapped, not kept.
class MappingCache {
 public:
  static MappingCache& Instance() {
    static MappingCache& cache = *new MappingCache();  // lives as long as the process
    return cache;
  }

  std::shared_ptr<HostMemoryPinner> pinner() const {
    MutexLock lock(&mu_);
    return pinner_;
  }

  // A cached mapping of exactly `bytes`, pinned as new ones are, now in use; or none, and
  // then `bytes` are counted in use for a new mapping, the oldest kept ones unmapped first
  // as far as needed to stay within the capacity (Forget undoes that if no mapping comes).
  std::optional<Mapping> TakeOrMakeRoom(size_t bytes) {
    std::vector<Mapping> evicted;
    {
      MutexLock lock(&mu_);
      in_use_bytes_ += bytes;
      for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
        if (it->bytes != bytes || it->pinned_by != pinner_) continue;
        Mapping mapping = std::move(*it);
        cached_bytes_ -= bytes;
        entries_.erase(std::next(it).base());
        return mapping;
      }
      while (!entries_.empty() && cached_bytes_ + in_use_bytes_ > capacity_) EvictOldest(evicted);
    }
    for (const Mapping& unmapped : evicted) Unmap(unmapped);
    return std::nullopt;
  }

  // `bytes` counted in use by TakeOrMakeRoom that no mapping took (the kernel refused one).
  void Forget(size_t bytes) {
    MutexLock lock(&mu_);
    in_use_bytes_ -= bytes;
  }

  // A mapping no longer in use: kept while the kept and in-use bytes stay within the
  // capacity, the oldest kept ones unmapped first; the newest is kept even alone beyond
  // it (the next update of that model takes it: the ingest window receives an update
  // larger than half of it alone).
  void Give(Mapping mapping) {
    std::vector<Mapping> evicted;
    {
      MutexLock lock(&mu_);
      in_use_bytes_ -= mapping.bytes;
      if (mapping.pinned_by != pinner_) {
        evicted.push_back(std::move(mapping));
      } else {
        cached_bytes_ += mapping.bytes;
        entries_.push_back(std::move(mapping));
        while (entries_.size() > 1 && cached_bytes_ + in_use_bytes_ > capacity_) EvictOldest(evicted);
      }
    }
    for (const Mapping& unmapped : evicted) Unmap(unmapped);
  }

  LargeAllocation::MappedBytes Bytes() const {
    MutexLock lock(&mu_);
    return LargeAllocation::MappedBytes{in_use_bytes_, cached_bytes_};
  }

  // Unmaps the oldest cached mappings until `bytes` of them are unmapped or none is left.
  void Trim(size_t bytes) {
    std::vector<Mapping> evicted;
    {
      MutexLock lock(&mu_);
      for (size_t freed = 0; freed < bytes && !entries_.empty(); freed += evicted.back().bytes) {
        EvictOldest(evicted);
      }
    }
    for (const Mapping& unmapped : evicted) Unmap(unmapped);
  }

  struct Pinning {
    std::shared_ptr<HostMemoryPinner> pinner;
    size_t capacity = 0;
  };
  // Unmaps every cached mapping; with `pinning`, new mappings are pinned by its pinner
  // from then on, and the cache keeps up to its capacity.
  void Clear(std::optional<Pinning> pinning = std::nullopt) {
    std::deque<Mapping> evicted;
    {
      MutexLock lock(&mu_);
      evicted.swap(entries_);
      cached_bytes_ = 0;
      if (pinning.has_value()) {
        pinner_ = std::move(pinning->pinner);
        capacity_ = pinning->capacity;
      }
    }
    for (const Mapping& unmapped : evicted) Unmap(unmapped);
  }

 private:
  // Moves the oldest kept mapping to `evicted` (to be unmapped outside the lock).
  void EvictOldest(std::vector<Mapping>& evicted) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    cached_bytes_ -= entries_.front().bytes;
    evicted.push_back(std::move(entries_.front()));
    entries_.pop_front();
  }

  mutable Mutex mu_;
  std::deque<Mapping> entries_ ABSL_GUARDED_BY(mu_);  // oldest first
  size_t cached_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  size_t in_use_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // mappings handed out and not yet given back
  size_t capacity_ ABSL_GUARDED_BY(mu_) = LargeAllocation::kCachedBytes;
  std::shared_ptr<HostMemoryPinner> pinner_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

LargeAllocation::LargeAllocation(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  if (bytes >= kMinMappedBytes) {
    MappingCache& cache = MappingCache::Instance();
    const bool huge = bytes >= kHugePageBytes;
    const size_t mapped = RoundUp(bytes, huge ? kHugePageBytes : kMappedGranule);
    std::optional<Mapping> mapping = cache.TakeOrMakeRoom(mapped);
    if (!mapping.has_value()) {
      std::byte* memory = nullptr;
      try {
        memory = huge ? MapAligned(mapped) : MapPages(mapped);
      } catch (const std::bad_alloc&) {
        cache.Forget(mapped);
        throw;
      }
      if (memory == nullptr) {
        cache.Forget(mapped);
      } else {
        mapping = Mapping{memory, mapped, nullptr};
        std::shared_ptr<HostMemoryPinner> pinner = cache.pinner();
        if (pinner != nullptr && pinner->Pin(memory, mapped)) mapping->pinned_by = std::move(pinner);
      }
    }
    if (mapping.has_value()) {
      memory_ = std::unique_ptr<std::byte, LargeAllocationRelease>(
          mapping->memory, LargeAllocationRelease{mapped, std::move(mapping->pinned_by)});
      return;
    }
  }
  void* memory = std::aligned_alloc(kHeapAlignment, RoundUp(bytes, kHeapAlignment));
  if (memory == nullptr) throw std::bad_alloc();
  memory_.reset(static_cast<std::byte*>(memory));
}

void LargeAllocation::TrimCache(size_t bytes) { MappingCache::Instance().Trim(bytes); }

LargeAllocation::MappedBytes LargeAllocation::Mapped() { return MappingCache::Instance().Bytes(); }

void LargeAllocation::KeepReleasedMappings(std::shared_ptr<HostMemoryPinner> pinner, size_t cached_bytes) {
  MappingCache::Instance().Clear(MappingCache::Pinning{std::move(pinner), cached_bytes + kCachedBytes});
}

ReleasedMappings::ReleasedMappings(std::shared_ptr<HostMemoryPinner> pinner, size_t cached_bytes)
    : active_(true) {
  LargeAllocation::KeepReleasedMappings(std::move(pinner), cached_bytes);
}

ReleasedMappings& ReleasedMappings::operator=(ReleasedMappings&& other) noexcept {
  if (this != &other) {
    if (active_) LargeAllocation::KeepReleasedMappings(nullptr, 0);
    active_ = std::exchange(other.active_, false);
  }
  return *this;
}

ReleasedMappings::~ReleasedMappings() {
  if (active_) LargeAllocation::KeepReleasedMappings(nullptr, 0);
}

void LargeAllocationRelease::operator()(std::byte* memory) const {
  if (mapped_bytes > 0) {
    MappingCache::Instance().Give(Mapping{memory, mapped_bytes, pinned_by});
  } else {
    std::free(memory);
  }
}

}  // namespace fedagg
