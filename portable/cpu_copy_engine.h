// CpuCopyEngine: the staging ring's copy engine on the CPU. "Device" memory is a second
// host buffer, and one copy thread runs the copies in the order they were started (a large
// span with streaming stores, which bypass the caches as a GPU's DMA does), so the ring's
// overlap and ordering behave as with a GPU's copy stream. The
// thrust-omp backend stages through it, and the ring's tests (TSan included) run on it.
#ifndef FEDAGG_PORTABLE_CPU_COPY_ENGINE_H_
#define FEDAGG_PORTABLE_CPU_COPY_ENGINE_H_

#include <deque>
#include <thread>
#include <vector>

#include "portable/copy_engine.h"
#include "service/core/mutex.h"

namespace fedagg::portable {

class CpuCopyEngine final : public CopyEngine {
 public:
  CpuCopyEngine();
  // Finishes the copies already started, then stops the copy thread.
  ~CpuCopyEngine() override;

  absl::StatusOr<std::unique_ptr<StagingBuffer>> Allocate(size_t bytes) override;
  absl::Status StartCopy(StagingBuffer& buffer, absl::Span<const CopySpan> spans) override;
  absl::StatusOr<absl::Duration> WaitCopied(StagingBuffer& buffer) override;
  absl::Status BindThread(int) override { return absl::OkStatus(); }

 private:
  class Buffer;
  struct Copy {
    Buffer* buffer;
    std::vector<CopySpan> spans;
  };
  void RunCopies();

  Mutex mu_;
  std::deque<Copy> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread copier_;
};

}  // namespace fedagg::portable

#endif  // FEDAGG_PORTABLE_CPU_COPY_ENGINE_H_
