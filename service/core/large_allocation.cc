// LargeAllocation: heap memory for small buffers, 2 MiB-aligned huge-page mappings for
// large ones, released mappings cached for reuse.
#include "service/core/large_allocation.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <deque>
#include <iterator>
#include <new>
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

// Released mappings kept for the next allocation of the same size. A fresh mapping costs
// page faults and the kernel's zeroing of every page; updates of one model all have the
// same size, so the next one can take the memory the last one left, already resident.
// At most LargeAllocation::kCachedBytes are kept, or one larger mapping alone; the oldest
// are unmapped first.
class MappingCache {
 public:
  static MappingCache& Instance() {
    static MappingCache& cache = *new MappingCache();  // lives as long as the process
    return cache;
  }

  // A cached mapping of exactly `bytes`, or nullptr.
  std::byte* Take(size_t bytes) {
    MutexLock lock(&mu_);
    for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
      if (it->second != bytes) continue;
      std::byte* memory = it->first;
      cached_bytes_ -= bytes;
      entries_.erase(std::next(it).base());
      return memory;
    }
    return nullptr;
  }

  void Give(std::byte* memory, size_t bytes) {
    std::vector<std::pair<std::byte*, size_t>> evicted;
    {
      MutexLock lock(&mu_);
      // A mapping larger than the cap is kept too, alone: the next update of that model
      // takes it (the ingest window receives such updates one at a time).
      while (!entries_.empty() && cached_bytes_ + bytes > LargeAllocation::kCachedBytes) {
        evicted.push_back(entries_.front());
        cached_bytes_ -= entries_.front().second;
        entries_.pop_front();
      }
      entries_.emplace_back(memory, bytes);
      cached_bytes_ += bytes;
    }
    for (const auto& [unmapped, size] : evicted) munmap(unmapped, size);
  }

  void Clear() {
    std::deque<std::pair<std::byte*, size_t>> evicted;
    {
      MutexLock lock(&mu_);
      evicted.swap(entries_);
      cached_bytes_ = 0;
    }
    for (const auto& [unmapped, size] : evicted) munmap(unmapped, size);
  }

 private:
  Mutex mu_;
  std::deque<std::pair<std::byte*, size_t>> entries_ ABSL_GUARDED_BY(mu_);  // oldest first
  size_t cached_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

LargeAllocation::LargeAllocation(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  if (bytes >= kHugePageBytes) {
    const size_t mapped = RoundUp(bytes, kHugePageBytes);
    std::byte* memory = MappingCache::Instance().Take(mapped);
    if (memory == nullptr) memory = MapAligned(mapped);
    memory_ = std::unique_ptr<std::byte, LargeAllocationRelease>(memory, LargeAllocationRelease{mapped});
    return;
  }
  void* memory = std::aligned_alloc(kHeapAlignment, RoundUp(bytes, kHeapAlignment));
  if (memory == nullptr) throw std::bad_alloc();
  memory_.reset(static_cast<std::byte*>(memory));
}

void LargeAllocation::TrimCache() { MappingCache::Instance().Clear(); }

void LargeAllocationRelease::operator()(std::byte* memory) const {
  if (mapped_bytes > 0) {
    MappingCache::Instance().Give(memory, mapped_bytes);
  } else {
    std::free(memory);
  }
}

}  // namespace fedagg
