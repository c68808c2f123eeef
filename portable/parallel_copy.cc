// ParallelCopy: byte ranges cut into chunks over a thread pool.
#include "portable/parallel_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace fedagg::portable {

void ParallelCopy(const std::vector<CopyRange>& ranges, ThreadPool& pool) {
  // starts[i]: where range i begins in the ranges' bytes laid end to end.
  std::vector<size_t> starts(ranges.size() + 1, 0);
  for (size_t i = 0; i < ranges.size(); ++i) starts[i + 1] = starts[i] + ranges[i].bytes;
  const size_t total = starts.back();
  pool.ParallelFor(static_cast<int64_t>(total), static_cast<int64_t>(kMinChunkBytes), [&](int64_t begin, int64_t end) {
    // The first range that ends after `begin`, then every range until `end`.
    size_t i = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), static_cast<size_t>(begin)) -
                                   starts.begin()) - 1;
    for (size_t at = static_cast<size_t>(begin); at < static_cast<size_t>(end); ++i) {
      if (ranges[i].bytes == 0) continue;
      const size_t offset = at - starts[i];
      const size_t bytes = std::min(starts[i + 1], static_cast<size_t>(end)) - at;
      std::memcpy(ranges[i].to + offset, ranges[i].from + offset, bytes);
      at += bytes;
    }
  });
}

}  // namespace fedagg::portable
