// The CPU copy engine: a copy thread, memcpy or streaming stores, and a done flag per
// buffer.
#include "portable/cpu_copy_engine.h"

#include <cstdint>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace fedagg::portable {
namespace {

// Spans from this size up are copied with streaming stores (see CopySpanBytes); a smaller
// one costs too little for the choice to show.
constexpr size_t kStreamingCopyBytes = size_t{1} << 16;

// Copies one span into "device" memory. A large span is written with streaming stores,
// which bypass the caches as a GPU's DMA does: the slot's lines are not read before they
// are overwritten, nor do they evict what the receiving threads are working on
// (docs/BENCHMARKS.md item 61: 1.4x memcpy's rate alone, 1.2x in the service).
void CopySpanBytes(std::byte* to, const std::byte* from, size_t bytes) {
#if defined(__x86_64__)
  if (bytes >= kStreamingCopyBytes) {
    const size_t head = (16 - reinterpret_cast<uintptr_t>(to) % 16) % 16;  // to a 16-byte boundary
    std::memcpy(to, from, head);
    size_t done = head;
    for (; done + 64 <= bytes; done += 64) {
      const __m128i* in = reinterpret_cast<const __m128i*>(from + done);
      __m128i* out = reinterpret_cast<__m128i*>(to + done);
      const __m128i a = _mm_loadu_si128(in), b = _mm_loadu_si128(in + 1), c = _mm_loadu_si128(in + 2),
                    d = _mm_loadu_si128(in + 3);
      _mm_stream_si128(out, a);
      _mm_stream_si128(out + 1, b);
      _mm_stream_si128(out + 2, c);
      _mm_stream_si128(out + 3, d);
    }
    std::memcpy(to + done, from + done, bytes - done);
    _mm_sfence();  // the streamed stores are visible before the copy is reported done
    return;
  }
#endif
  std::memcpy(to, from, bytes);
}

}  // namespace

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
    for (const CopySpan& span : copy.spans) {
      CopySpanBytes(copy.buffer->device_bytes() + span.to, static_cast<const std::byte*>(span.from), span.bytes);
    }
    const absl::Duration took = absl::Now() - start;
    MutexLock lock(&mu_);
    copy.buffer->took = took;
    copy.buffer->copying = false;
  }
}

}  // namespace fedagg::portable
