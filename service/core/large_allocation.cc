// LargeAllocation: heap memory for small buffers, 2 MiB-aligned huge-page mappings for
// large ones.
#include "service/core/large_allocation.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <new>

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

}  // namespace

LargeAllocation::LargeAllocation(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  if (bytes >= kHugePageBytes) {
    const size_t mapped = RoundUp(bytes, kHugePageBytes);
    memory_ = std::unique_ptr<std::byte, LargeAllocationRelease>(MapAligned(mapped), LargeAllocationRelease{mapped});
    return;
  }
  void* memory = std::aligned_alloc(kHeapAlignment, RoundUp(bytes, kHeapAlignment));
  if (memory == nullptr) throw std::bad_alloc();
  memory_.reset(static_cast<std::byte*>(memory));
}

void LargeAllocationRelease::operator()(std::byte* memory) const {
  if (mapped_bytes > 0) {
    munmap(memory, mapped_bytes);
  } else {
    std::free(memory);
  }
}

}  // namespace fedagg
