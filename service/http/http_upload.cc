// One resumable upload of the HTTP path: its states, writes at offsets and submit.
#include "service/http/http_upload.h"

#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "service/core/crc32c.h"

namespace fedagg {

HttpUpload::HttpUpload(ServiceContext& service, v1::UpdateHeader header, StreamLimiter::Slot slot)
    : header_(std::move(header)), assembler_(service), slot_(std::move(slot)), metrics_(service.metrics) {}

void HttpUpload::Start() {
  assembler_.Begin(header_, header_.client_id(),
                   [self = shared_from_this()](absl::Status begun) { self->Begun(std::move(begun)); });
}

void HttpUpload::Begun(absl::Status begun) {
  MutexLock lock(&mu_);
  if (state() == v1::UploadStatus::ABORTED) {  // deleted or expired while it waited
    assembler_.Abandon();
    return;
  }
  if (!begun.ok()) {
    error_ = std::move(begun);
    slot_ = {};
    SetState(v1::UploadStatus::FAILED);
    return;
  }
  total_size_ = assembler_.total_bytes();
  SetState(v1::UploadStatus::OPEN);
}

absl::StatusOr<v1::UploadStatus> HttpUpload::AwaitStarted(absl::Time deadline) {
  MutexLock lock(&mu_);
  mu_.AwaitWithDeadline([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return state() != v1::UploadStatus::WAITING; }, deadline);
  if (state() == v1::UploadStatus::FAILED) return error_;
  return StatusLocked();
}

void HttpUpload::Take(uint64_t offset, const char* data, size_t size, BodyCheck& check) {
  check.crc = Crc32cExtend(check.crc, data, size);
  const uint64_t committed = assembler_.committed_bytes();
  while (size > 0) {
    const uint64_t at = offset + check.received;
    absl::Span<std::byte> piece = assembler_.WirePiece(at);
    const size_t n = static_cast<size_t>(std::min<uint64_t>(piece.size(), size));
    if (at < committed) {
      // A repeat of committed bytes: compared, never written over.
      const size_t repeated = static_cast<size_t>(std::min<uint64_t>(n, committed - at));
      if (std::memcmp(piece.data(), data, repeated) != 0) check.differs = true;
      std::memcpy(piece.data() + repeated, data + repeated, n - repeated);
    } else {
      std::memcpy(piece.data(), data, n);
    }
    data += n;
    size -= n;
    check.received += n;
  }
}

absl::StatusOr<v1::UploadStatus> HttpUpload::Write(uint64_t offset, uint32_t crc32c, uint64_t length,
                                                   BodyReader read) {
  MutexLock lock(&mu_);
  switch (state()) {
    case v1::UploadStatus::OPEN: break;
    case v1::UploadStatus::WAITING:
      return absl::FailedPreconditionError(
          "the upload is waiting for room in the server's ingest window; repeat the start (POST) until it is OPEN");
    case v1::UploadStatus::COUNTING:
    case v1::UploadStatus::COUNTED: {
      // A write re-sent after the submit (a browser repeats a request whose connection
      // dropped): nothing can change any more, so it is read, dropped and answered with
      // the upload's state.
      if (length > total_size_ || offset > total_size_ - length) {
        return absl::FailedPreconditionError("the upload was submitted; its bytes can no longer change");
      }
      uint64_t received = 0;
      read([&received](const char*, size_t size) {
        received += size;
        return true;
      });
      metrics_.http_upload_bytes.WithLabels({"repeated"}).Increment(static_cast<double>(received));
      return StatusLocked();
    }
    default:
      return absl::FailedPreconditionError(absl::StrCat("the upload is ", v1::UploadStatus::State_Name(state()),
                                                        "; start it again (POST) to send the update"));
  }
  const uint64_t committed = assembler_.committed_bytes();
  if (offset > committed) {
    return absl::AbortedError(absl::StrCat("write at offset ", offset, " leaves a gap: ", committed,
                                           " bytes are committed; write from there"));
  }
  if (length > total_size_ - offset) {
    return absl::OutOfRangeError(absl::StrCat("write of ", length, " bytes at offset ", offset,
                                              " goes beyond the update's ", total_size_, " bytes"));
  }
  BodyCheck check;
  const bool whole = read([&](const char* data, size_t size) {
    if (check.received + size > length) return false;  // more than Content-Length
    Take(offset, data, size, check);
    return true;
  });
  if (!whole || check.received != length) {
    metrics_.http_upload_bytes.WithLabels({"discarded"}).Increment(static_cast<double>(check.received));
    return absl::CancelledError(absl::StrCat("the write's body ended after ", check.received, " of ", length,
                                             " bytes; nothing of it was committed"));
  }
  if (check.crc != crc32c) {
    metrics_.http_upload_bytes.WithLabels({"discarded"}).Increment(static_cast<double>(length));
    return absl::DataLossError(absl::StrCat("write at offset ", offset, ": sent CRC-32C ", crc32c, ", computed ",
                                            check.crc, " over the ", length,
                                            " bytes received; nothing was committed, send them again"));
  }
  if (check.differs) {
    metrics_.http_upload_bytes.WithLabels({"discarded"}).Increment(static_cast<double>(length));
    return absl::FailedPreconditionError(absl::StrCat(
        "write at offset ", offset, " differs from the bytes committed there: the update changed; delete the "
        "upload (DELETE) and start it again"));
  }
  const uint64_t end = offset + length;
  metrics_.http_upload_bytes.WithLabels({"repeated"}).Increment(static_cast<double>(std::min(end, committed) - offset));
  if (end > committed) {
    assembler_.CommitThrough(end);
    metrics_.http_upload_bytes.WithLabels({"appended"}).Increment(static_cast<double>(end - committed));
  }
  return StatusLocked();
}

absl::StatusOr<v1::UploadStatus> HttpUpload::Submit(const v1::UpdateEnd& end, absl::Time deadline) {
  {
    MutexLock lock(&mu_);
    switch (state()) {
      case v1::UploadStatus::OPEN: {
        const uint64_t committed = assembler_.committed_bytes();
        if (committed < total_size_) {
          return absl::FailedPreconditionError(absl::StrCat("the update is incomplete: ", committed, " of ",
                                                            total_size_, " bytes committed; write the rest first"));
        }
        SetState(v1::UploadStatus::COUNTING);
        break;
      }
      case v1::UploadStatus::WAITING:
        return absl::FailedPreconditionError(
            "the upload is waiting for room in the server's ingest window; nothing was written yet");
      case v1::UploadStatus::ABORTED:
        return absl::FailedPreconditionError("the upload was aborted; start it again (POST) to send the update");
      default: {  // COUNTING, COUNTED, FAILED: the first answer
        mu_.AwaitWithDeadline([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return state() != v1::UploadStatus::COUNTING; },
                              deadline);
        if (state() == v1::UploadStatus::FAILED) return error_;
        return StatusLocked();
      }
    }
  }
  // COUNTING: this thread alone uses the assembler until the answer.
  absl::Status ended = assembler_.End(
      end, [self = shared_from_this()](absl::StatusOr<UpdateAssembler::Counted> counted) {
        self->Counted(std::move(counted));
      });
  if (!ended.ok()) Counted(std::move(ended));
  MutexLock lock(&mu_);
  mu_.AwaitWithDeadline([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return state() != v1::UploadStatus::COUNTING; }, deadline);
  if (state() == v1::UploadStatus::FAILED) return error_;
  return StatusLocked();
}

void HttpUpload::Counted(absl::StatusOr<UpdateAssembler::Counted> counted) {
  MutexLock lock(&mu_);
  slot_ = {};
  if (!counted.ok()) {
    error_ = counted.status();
    SetState(v1::UploadStatus::FAILED);
    return;
  }
  ack_.set_aggregation_id(header_.aggregation_id());
  ack_.set_contributions(counted->contributions);
  ack_.set_level(counted->level);
  SetState(v1::UploadStatus::COUNTED);
}

absl::StatusOr<v1::UploadStatus> HttpUpload::Abort() {
  MutexLock lock(&mu_);
  switch (state()) {
    case v1::UploadStatus::COUNTING:
      return absl::FailedPreconditionError("the upload is being counted; ask again (GET) for its answer");
    case v1::UploadStatus::COUNTED:
      return absl::FailedPreconditionError("the upload was counted; there is nothing to abort");
    case v1::UploadStatus::OPEN:
      assembler_.Abandon();
      break;
    default:  // WAITING: Begun abandons what Begin gets; FAILED, ABORTED: nothing is held
      break;
  }
  slot_ = {};
  SetState(v1::UploadStatus::ABORTED);
  return StatusLocked();
}

void HttpUpload::Expire() {
  MutexLock lock(&mu_);
  const v1::UploadStatus::State now = state();
  if (now != v1::UploadStatus::WAITING && now != v1::UploadStatus::OPEN) return;
  if (now == v1::UploadStatus::OPEN) assembler_.Abandon();
  slot_ = {};
  SetState(v1::UploadStatus::ABORTED);
}

v1::UploadStatus HttpUpload::Status() {
  MutexLock lock(&mu_);
  return StatusLocked();
}

uint64_t HttpUpload::CommittedSize() {
  MutexLock lock(&mu_);
  return state() == v1::UploadStatus::OPEN ? assembler_.committed_bytes() : 0;
}

bool HttpUpload::SameUpdate(const v1::UpdateHeader& header) const {
  return google::protobuf::util::MessageDifferencer::Equals(header, header_);
}

void HttpUpload::SetState(v1::UploadStatus::State state) { state_.store(state, std::memory_order_release); }

v1::UploadStatus HttpUpload::StatusLocked() {
  v1::UploadStatus status;
  status.set_aggregation_id(header_.aggregation_id());
  status.set_client_id(header_.client_id());
  status.set_state(state());
  status.set_total_size(total_size_);
  status.set_max_chunk_bytes(kMaxChunkBytes);
  switch (state()) {
    case v1::UploadStatus::OPEN: status.set_committed_size(assembler_.committed_bytes()); break;
    case v1::UploadStatus::COUNTING:
    case v1::UploadStatus::COUNTED: status.set_committed_size(total_size_); break;
    default: break;
  }
  if (state() == v1::UploadStatus::COUNTED) *status.mutable_ack() = ack_;
  if (state() == v1::UploadStatus::FAILED) {
    status.mutable_error()->set_code(absl::StatusCodeToString(error_.code()));
    status.mutable_error()->set_message(std::string(error_.message()));
  }
  return status;
}

}  // namespace fedagg
