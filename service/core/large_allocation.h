// LargeAllocation: an owned, uninitialised byte buffer for update payloads (values and
// indices). An update of a large model is received into fresh memory, touched once and
// freed. Two costs of doing that through the heap dominated receiving large updates
// (docs/BENCHMARKS.md, "What each optimisation changed"): with 4 KiB pages a 16 MB
// update takes ~3,900 page faults before a byte of it is written, and a freed buffer
// stays resident in the heap arena of the thread that freed it, so a server's peak RSS
// grew with the number of threads that had received an update. So buffers of
// kMinMappedBytes and more are mapped on their own (mmap): from kHugePageBytes up aligned
// to 2 MiB and advised to the kernel as transparent-huge-page candidates (MADV_HUGEPAGE;
// a no-op where THP is off), below that in whole 64 KiB granules. A released mapping is
// kept for the next buffer of its size (updates of one model all have one size), which
// skips the kernel's faults and zeroing of fresh pages (a 1 MiB update took 256 of them
// on every receive while such buffers came from the heap). Kept and in-use mappings
// together stay within the cache's capacity (kCachedBytes, beyond what a server asks: its
// ingest window): a new mapping makes room among the kept ones first, the oldest
// unmapped first, so kept buffers of sizes no update takes any more never hold memory
// beside the updates in use beyond it; the newest released mapping is kept even alone
// beyond it. TrimCache gives back as many bytes of kept ones as asked (an aggregation that
// finalizes makes room for its result that way, and keeps the rest for the next round's
// updates). Smaller
// buffers, and a buffer below a huge page whose mapping the kernel refuses (too many
// mappings), are cache-line-aligned heap memory.
// A server keeps mappings up to its ingest window (KeepReleasedMappings), so that in the
// steady state no update pays for fresh pages; with a device backend that reads updates
// straight from host memory, every mapping is pinned once, when mapped
// (HostMemoryPinner), and unpinned before it is unmapped, so no update pays for pinning
// either.
#ifndef FEDAGG_SERVICE_CORE_LARGE_ALLOCATION_H_
#define FEDAGG_SERVICE_CORE_LARGE_ALLOCATION_H_

#include <cstddef>
#include <limits>
#include <memory>
#include <utility>

#include "service/core/host_memory_pinner.h"

namespace fedagg {

// Frees what LargeAllocation holds: caches or unmaps a mapping, frees heap memory.
struct LargeAllocationRelease {
  size_t mapped_bytes = 0;  // 0: heap memory
  std::shared_ptr<HostMemoryPinner> pinned_by;  // null: not pinned
  void operator()(std::byte* memory) const;
};

class LargeAllocation {
 public:
  static constexpr size_t kHugePageBytes = size_t{2} << 20;
  // Mappings kept for reuse and in use together, process-wide, beyond what a server asks
  // (ReleasedMappings); resident: kept ones show in the RSS.
  static constexpr size_t kCachedBytes = size_t{32} << 20;
  // Buffers from this size up are mappings (pinned ones, with a pinner).
  static constexpr size_t kMinMappedBytes = size_t{64} << 10;

  LargeAllocation() = default;
  // Uninitialised; throws std::bad_alloc like operator new when memory is exhausted.
  // Zero bytes gives an empty allocation (data() == nullptr).
  explicit LargeAllocation(size_t bytes);
  LargeAllocation(LargeAllocation&& other) noexcept
      : memory_(std::move(other.memory_)), size_(std::exchange(other.size_, 0)) {}
  LargeAllocation& operator=(LargeAllocation&& other) noexcept {
    memory_ = std::move(other.memory_);
    size_ = std::exchange(other.size_, 0);
    return *this;
  }

  // Unmaps released mappings kept for reuse, the oldest first, until `bytes` of them are
  // unmapped or none is left (by default, all of them).
  static void TrimCache(size_t bytes = std::numeric_limits<size_t>::max());
  // Bytes of mappings, process-wide: in use (held by LargeAllocations) and kept for reuse.
  struct MappedBytes {
    size_t in_use = 0;
    size_t kept = 0;
  };
  static MappedBytes Mapped();
  // From now on, new mappings are pinned with `pinner` (null: no longer pinned), and the
  // kept and in-use mappings together stay within cached_bytes + kCachedBytes (the
  // kCachedBytes beyond it leave room for the mappings' rounding: a window of updates in
  // use maps a little more than its payload bytes).
  // Process-wide; the cache is emptied first. Mappings pinned before are unpinned by their
  // own pinner when unmapped.
  static void KeepReleasedMappings(std::shared_ptr<HostMemoryPinner> pinner, size_t cached_bytes);
  // Whether this allocation's memory is pinned.
  bool pinned() const { return memory_.get_deleter().pinned_by != nullptr; }

  std::byte* data() const { return memory_.get(); }
  size_t size() const { return size_; }

 private:
  std::unique_ptr<std::byte, LargeAllocationRelease> memory_;
  size_t size_ = 0;
};

// How released mappings are kept while it lives (LargeAllocation::KeepReleasedMappings: up
// to `cached_bytes`, pinned with `pinner` unless it is null), the defaults again after
// (kCachedBytes, unpinned): a server holds one for its life.
class ReleasedMappings {
 public:
  ReleasedMappings() = default;  // changes nothing
  ReleasedMappings(std::shared_ptr<HostMemoryPinner> pinner, size_t cached_bytes);
  ReleasedMappings(ReleasedMappings&& other) noexcept : active_(std::exchange(other.active_, false)) {}
  ReleasedMappings& operator=(ReleasedMappings&& other) noexcept;
  ~ReleasedMappings();

 private:
  bool active_ = false;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_LARGE_ALLOCATION_H_
