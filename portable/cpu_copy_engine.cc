// The CPU copy engine: a copy thread, memcpy, and a done flag per buffer.
#include "portable/cpu_copy_engine.h"

#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"

namespace fedagg::portable {

class CpuCopyEngine::Buffer final : public StagingBuffer {
 public:
  Buffer(std::unique_ptr<std::byte[]> host, std::unique_ptr<std::byte[]> device, size_t bytes)
      : host_(std::move(host)), device_(std::move(device)), bytes_(bytes) {}

  void* host() override { return host_.get(); }
  const void* device() const override { return device_.get(); }
  size_t bytes() const override { return bytes_; }
  std::byte* device_bytes() { return device_.get(); }

  // Guarded by the engine's mutex: whether a copy is pending, and how long the last took.
  bool copying = false;
  absl::Duration took;

 private:
  std::unique_ptr<std::byte[]> host_;
  std::unique_ptr<std::byte[]> device_;
  size_t bytes_;
};

CpuCopyEngine::CpuCopyEngine() : copier_([this] { RunCopies(); }) {}

CpuCopyEngine::~CpuCopyEngine() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  copier_.join();
}

absl::StatusOr<std::unique_ptr<StagingBuffer>> CpuCopyEngine::Allocate(size_t bytes) {
  std::unique_ptr<std::byte[]> host(new (std::nothrow) std::byte[bytes]);
  std::unique_ptr<std::byte[]> device(new (std::nothrow) std::byte[bytes]);
  if (host == nullptr || device == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("could not allocate a staging slot of ", bytes, " bytes (twice, host memory)"));
  }
  return std::make_unique<Buffer>(std::move(host), std::move(device), bytes);
}

absl::Status CpuCopyEngine::StartCopy(StagingBuffer& buffer, absl::Span<const CopySpan> spans) {
  Buffer& target = static_cast<Buffer&>(buffer);
  MutexLock lock(&mu_);
  if (stopping_) return absl::CancelledError("the copy engine is stopping");
  target.copying = true;
  queue_.push_back(Copy{&target, std::vector<CopySpan>(spans.begin(), spans.end())});
  return absl::OkStatus();
}

absl::StatusOr<absl::Duration> CpuCopyEngine::WaitCopied(StagingBuffer& buffer) {
  Buffer& target = static_cast<Buffer&>(buffer);
  MutexLock lock(&mu_);
  mu_.Await([&] { return !target.copying; });
  return target.took;
}

void CpuCopyEngine::RunCopies() {
  while (true) {
    Copy copy;
    {
      MutexLock lock(&mu_);
      mu_.Await([&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and every started copy is done
      copy = queue_.front();
      queue_.pop_front();
    }
    const absl::Time start = absl::Now();
    for (const CopySpan& span : copy.spans) std::memcpy(copy.buffer->device_bytes() + span.to, span.from, span.bytes);
    const absl::Duration took = absl::Now() - start;
    MutexLock lock(&mu_);
    copy.buffer->took = took;
    copy.buffer->copying = false;
  }
}

}  // namespace fedagg::portable
