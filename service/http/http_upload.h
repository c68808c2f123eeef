// HttpUpload: one resumable upload of the HTTP path (docs/PROTOCOL.md 4a) — one client's
// update to one aggregation, written as one byte string in wire order in pieces at
// offsets, each piece committed once its CRC-32C held, and counted at submit. The update
// goes through the same UpdateAssembler as Contribute and Submit: the same header checks,
// the client id reserved from the start, the ingest window's place and the memory
// budget's bytes held until submit, the same validation and exactly-once commit.
//
// States: WAITING (Begin has not finished: the window has no room yet) -> OPEN (writes)
// -> COUNTING (submitted) -> COUNTED or FAILED; ABORTED by the client or by expiry. The
// answer of COUNTED or FAILED is kept, so a repeated submit gets the first answer.
#ifndef FEDAGG_SERVICE_HTTP_HTTP_UPLOAD_H_
#define FEDAGG_SERVICE_HTTP_HTTP_UPLOAD_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "fedagg/v1/upload.pb.h"
#include "service/core/mutex.h"
#include "service/rpc/service_context.h"
#include "service/rpc/stream_limiter.h"
#include "service/rpc/update_assembler.h"

namespace fedagg {

class HttpUpload : public std::enable_shared_from_this<HttpUpload> {
 public:
  // The largest body one write carries.
  static constexpr uint64_t kMaxChunkBytes = uint64_t{16} << 20;

  // `header` names the aggregation and the client; `slot` is the caller identity's, held
  // while the upload is WAITING, OPEN or COUNTING.
  HttpUpload(ServiceContext& service, v1::UpdateHeader header, StreamLimiter::Slot slot);

  // Begins the update (once, by whoever made the upload).
  void Start();
  // The status once the upload is no longer WAITING, or at `deadline`; the refusal of a
  // start that FAILED.
  absl::StatusOr<v1::UploadStatus> AwaitStarted(absl::Time deadline);

  // Feeds the body's bytes, in order, to the function it is given; false when the body
  // ended early (the connection broke).
  using BodyReader = absl::FunctionRef<bool(absl::FunctionRef<bool(const char*, size_t)>)>;
  // Writes `length` bytes at `offset` (docs/PROTOCOL.md 4a, "Write"): committed when
  // they all arrived and their CRC-32C is `crc32c`.
  absl::StatusOr<v1::UploadStatus> Write(uint64_t offset, uint32_t crc32c, uint64_t length, BodyReader read);
  // Counts the update once every byte is committed (the first answer for a repeat);
  // COUNTING when the count did not finish by `deadline`.
  absl::StatusOr<v1::UploadStatus> Submit(const v1::UpdateEnd& end, absl::Time deadline);
  // Discards the update: nothing is counted, the client id is free.
  absl::StatusOr<v1::UploadStatus> Abort();
  // Discards a WAITING or OPEN upload nobody asked about for its idle timeout.
  void Expire();

  v1::UploadStatus Status();
  // Bytes committed so far (0 unless OPEN).
  uint64_t CommittedSize();
  // Whether `header` asks for the same update as this upload's (ids, weight, layout, level).
  bool SameUpdate(const v1::UpdateHeader& header) const;
  v1::UploadStatus::State state() const { return state_.load(std::memory_order_acquire); }
  // FAILED or ABORTED: a new start replaces the upload.
  bool finished_without_count() const {
    const v1::UploadStatus::State now = state();
    return now == v1::UploadStatus::FAILED || now == v1::UploadStatus::ABORTED;
  }

 private:
  void Begun(absl::Status begun);
  void Counted(absl::StatusOr<UpdateAssembler::Counted> counted);
  void SetState(v1::UploadStatus::State state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::UploadStatus StatusLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // With the bytes of one write: compares those below the committed size with the
  // committed ones and places the rest, checksumming all.
  struct BodyCheck {
    uint64_t received = 0;
    uint32_t crc = 0;
    bool differs = false;  // a byte below the committed size is not the committed one
  };
  void Take(uint64_t offset, const char* data, size_t size, BodyCheck& check) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const v1::UpdateHeader header_;
  Mutex mu_;
  // Used by one thread at a time: Start and the Begin callback while WAITING, writers
  // under mu_ while OPEN, Submit and its callback while COUNTING.
  UpdateAssembler assembler_;
  std::atomic<v1::UploadStatus::State> state_{v1::UploadStatus::WAITING};  // written under mu_
  StreamLimiter::Slot slot_ ABSL_GUARDED_BY(mu_);
  uint64_t total_size_ ABSL_GUARDED_BY(mu_) = 0;
  v1::Ack ack_ ABSL_GUARDED_BY(mu_);             // COUNTED
  absl::Status error_ ABSL_GUARDED_BY(mu_);      // FAILED
  ServiceMetrics& metrics_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_HTTP_HTTP_UPLOAD_H_
