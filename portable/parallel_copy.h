// ParallelCopy: copies a list of byte ranges with the host's cores. The ranges' bytes, laid
// end to end, are cut into chunks of at least kMinChunkBytes spread over a thread pool
// (ThreadPool::Default unless given), so that one 16 MiB range is copied by several
// threads and a thousand 4 KiB ranges by a few. Packing a batch into a staging slot
// (batch_packer.h) goes through it: one thread's memcpy into pinned memory moves ~8 GB/s,
// a third of what a many-core host moves and a fraction of what the copy to the device does.
#ifndef FEDAGG_PORTABLE_PARALLEL_COPY_H_
#define FEDAGG_PORTABLE_PARALLEL_COPY_H_

#include <cstddef>
#include <vector>

#include "service/core/thread_pool.h"

namespace fedagg::portable {

struct CopyRange {
  std::byte* to = nullptr;
  const std::byte* from = nullptr;
  size_t bytes = 0;
};

// Below this a chunk is not worth a thread's wake-up.
inline constexpr size_t kMinChunkBytes = size_t{1} << 20;

// Copies every range (they must not overlap one another); returns when all are copied.
void ParallelCopy(const std::vector<CopyRange>& ranges, ThreadPool& pool = ThreadPool::Default());

}  // namespace fedagg::portable

#endif  // FEDAGG_PORTABLE_PARALLEL_COPY_H_
