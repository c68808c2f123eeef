// UpdateAssembler: turns the header / chunks / end messages of one update into a
// committed contribution. Shared by the Contribute (bidi) and Submit (client-streaming)
// reactors so both paths validate and account identically:
//   Begin  — finds the aggregation, checks the header, reserves the client id, waits for
//            the update's place in the ingest window (when the server has one), then
//            claims its bytes from the memory budget and allocates the UpdateBuffer
//   AddChunk — copies a chunk straight into its place, from a parsed Chunk or from the
//              gRPC slices it arrived in (RawChunk), and checksums it there while the
//              sections arrive in wire order; chunks of a section arrive in order, without
//              gaps or overlaps, within the declared size
//   End    — checks every section is complete, the CRC-32C and the values, then hands
//            the update over to be counted (on an intermediate aggregator once its parent
//            granted the client's claim, Aggregation::ClaimAndCommit) and reports the ack:
//            RECEIVED, or DURABLE once a checkpoint holds the update when the header asked
//            for it. The assembler is free for the next update as soon as End returns.
// Any error abandons the update: nothing of it is counted, and the client id is free.
// The HTTP path writes the update instead as one byte string in wire order, at offsets,
// committing each piece once its checksum held (WirePiece, CommitThrough), then calls End.
#ifndef FEDAGG_SERVICE_RPC_UPDATE_ASSEMBLER_H_
#define FEDAGG_SERVICE_RPC_UPDATE_ASSEMBLER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "fedagg/v1/aggregation.pb.h"
#include "monitoring/service_metrics.h"
#include "service/core/update_buffer.h"
#include "service/rounds/aggregation_registry.h"
#include "service/rpc/raw_chunk.h"
#include "service/rpc/service_context.h"

namespace fedagg {

class UpdateAssembler {
 public:
  // Largest accepted chunk payload.
  static constexpr size_t kMaxChunkBytes = 4 << 20;
  static_assert(kMaxChunkBytes < kMaxReceivedMessageBytes, "a chunk must fit in a received message");

  explicit UpdateAssembler(ServiceContext& service)
      : registry_(service.registry),
        metrics_(service.metrics),
        max_update_bytes_(service.max_update_bytes),
        memory_budget_(service.memory_budget),
        ingest_window_(service.ingest_window) {}
  ~UpdateAssembler() { Abandon(); }

  // Starts an update. `done` receives the outcome — inline when the aggregation is known
  // here, later on another thread when an intermediate aggregator first asks its parent.
  // The caller sends nothing else to the assembler until `done` ran.
  void Begin(const v1::UpdateHeader& header, const std::string& client_id,
             std::function<void(absl::Status)> done);
  absl::Status AddChunk(const v1::Chunk& chunk);
  absl::Status AddChunk(const RawChunk& chunk);
  // What an ack reports: the contributions counted at this node after the update, and
  // its level — DURABLE when asked for and a checkpoint on disk holds the update, else
  // RECEIVED (also when no checkpoint will: shutdown).
  struct Counted {
    int64_t contributions = 0;
    v1::AckLevel level = v1::RECEIVED;
  };
  // Ends the update. A refusal found here (incomplete, checksum, invalid values) is
  // returned and `done` never runs. Otherwise `done` runs once — inline, or later on
  // another thread (the parent's claim answer, a checkpoint) — with the ack or the
  // refusal (a claim refused up the tree, the aggregation closed meanwhile). `done` must
  // not touch the assembler: it is free for the next update from the moment End returns.
  absl::Status End(const v1::UpdateEnd& end, std::function<void(absl::StatusOr<Counted>)> done);
  // Drops an update in progress (no-op when none).
  void Abandon();

  // Resumable writes (the HTTP path, service/http/http_upload.h). The update's bytes are
  // its sections back to back in wire order (field 0 indices, field 0 values, field 1
  // ...), total_bytes() of them; the first committed_bytes() are in place. WirePiece is
  // the update's memory from `offset` (< total_bytes()) to the end of that offset's
  // section; a writer may fill it ahead of the committed bytes, and CommitThrough(end)
  // then marks every byte before `end` received. Only while active(), between Begin's
  // success and End.
  uint64_t total_bytes();
  uint64_t committed_bytes() const;
  absl::Span<std::byte> WirePiece(uint64_t offset);
  void CommitThrough(uint64_t end);

  bool active() const { return aggregation_ != nullptr; }
  const std::string& aggregation_id() const { return aggregation_id_; }

 private:
  // Second half of Begin, once the aggregation is known; runs `done` once.
  void BeginWith(std::shared_ptr<Aggregation> aggregation, const v1::UpdateHeader& header,
                 const std::string& client_id, std::function<void(absl::Status)> done);
  // The header against the aggregation's spec and this node's limits: the update's layout.
  absl::StatusOr<UpdateBuffer::Layout> CheckHeader(const Aggregation& aggregation,
                                                   const v1::UpdateHeader& header) const;
  // AddChunk's work, for a payload in one or several pieces.
  absl::Status AddChunkPayload(uint32_t field, int32_t section, uint64_t offset,
                               absl::Span<const absl::Span<const std::byte>> data, size_t data_bytes);
  // Bytes the header declared for a section, by its place in wire order (field * 2, + 1
  // for values).
  uint64_t SectionSize(size_t ordinal);
  // "field 'w' (float32[3], field 0) values", for messages about one section of the update.
  std::string SectionName(size_t field, bool indices) const;
  // For a section whose byte count is not the declared one: a hint at a dtype mix-up when
  // one is a small multiple of the other (float64 sent for float32, ...), else empty.
  std::string SizeHint(size_t field, bool indices, uint64_t declared, uint64_t sent) const;
  // Abandons the update, counts the rejection, and returns `status`.
  absl::Status Fail(absl::Status status);
  static void CountRejection(ServiceMetrics& metrics, const absl::Status& status);

  AggregationRegistry& registry_;
  ServiceMetrics& metrics_;
  absl::Time started_;  // when the header arrived
  const uint64_t max_update_bytes_;
  MemoryBudget* const memory_budget_;  // may be null
  IngestWindow* const ingest_window_;  // may be null
  std::shared_ptr<Aggregation> aggregation_;
  std::string aggregation_id_;
  std::string client_id_;
  v1::AckLevel ack_level_ = v1::RECEIVED;  // asked for by the header
  std::optional<UpdateBuffer> buffer_;
  // Bytes received so far per section, in wire order: [field * 2 + (section == VALUES)].
  std::vector<uint64_t> received_;
  // CRC-32C of the bytes received so far, while they arrived in wire order: the sections
  // before crc_cursor_ are complete and checksummed, the one at it in part.
  size_t crc_cursor_ = 0;
  bool crc_in_order_ = true;
  uint32_t running_crc_ = 0;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_RPC_UPDATE_ASSEMBLER_H_
