// UpdateAssembler: header, chunks and end of one update, into a committed contribution.
#include "service/rpc/update_assembler.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "service/core/crc32c.h"
#include "service/core/status_macros.h"

namespace fedagg {

void UpdateAssembler::Begin(const v1::UpdateHeader& header, const std::string& client_id,
                            std::function<void(absl::Status)> done) {
  Abandon();
  metrics_.updates_received.Increment();
  started_ = absl::Now();
  if (client_id.empty()) {
    done(Fail(absl::InvalidArgumentError("client id is empty: send it in Hello (or in the header for Submit)")));
    return;
  }
  registry_.GetAsync(header.aggregation_id(),
                     [this, header, client_id, done = std::move(done)](
                         absl::StatusOr<std::shared_ptr<Aggregation>> aggregation) mutable {
                       if (!aggregation.ok()) {
                         done(Fail(aggregation.status()));
                         return;
                       }
                       BeginWith(*std::move(aggregation), header, client_id, std::move(done));
                     });
}

absl::StatusOr<UpdateBuffer::Layout> UpdateAssembler::CheckHeader(const Aggregation& aggregation,
                                                                  const v1::UpdateHeader& header) const {
  std::vector<int64_t> nnz;
  const std::vector<FieldSpec>& fields = aggregation.reduction().fields();
  for (int f = 0; f < header.fields_size(); ++f) {
    const v1::FieldLayout& layout = header.fields(f);
    nnz.push_back(layout.nnz());
    const int declared = static_cast<int>(f < static_cast<int>(fields.size()) ? fields[f].type.dtype : DType{});
    if (layout.dtype() != v1::DTYPE_UNSPECIFIED && static_cast<int>(layout.dtype()) != declared &&
        f < static_cast<int>(fields.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "field '", fields[f].path, "' (", fields[f].type.ToString(), "): sent dtype ",
          v1::DType_Name(layout.dtype()), ", declared ", DTypeName(fields[f].type.dtype),
          "; convert the values before sending"));
    }
  }
  if (!v1::AckLevel_IsValid(header.ack_level())) {
    return absl::InvalidArgumentError(absl::StrCat("UpdateHeader.ack_level ", header.ack_level(),
                                                   " is not RECEIVED or DURABLE"));
  }
  if (header.ack_level() == v1::DURABLE && !aggregation.durable_acks()) {
    return absl::FailedPreconditionError(
        registry_.is_intermediate()
            ? "DURABLE acks were asked for, but no checkpoint holds what this intermediate aggregator "
              "forwards (its root runs without --checkpoint_dir); ask for RECEIVED acks here, or "
              "contribute under a root that runs with --checkpoint_dir"
            : "DURABLE acks were asked for, but this server runs without checkpoints "
              "(--checkpoint_dir is not set); ask for RECEIVED acks, or restart the server with "
              "--checkpoint_dir");
  }
  return UpdateBuffer::Plan(aggregation.reduction(), nnz, max_update_bytes_);
}

void UpdateAssembler::BeginWith(std::shared_ptr<Aggregation> aggregation, const v1::UpdateHeader& header,
                                const std::string& client_id, std::function<void(absl::Status)> done) {
  absl::StatusOr<UpdateBuffer::Layout> layout = CheckHeader(*aggregation, header);
  if (!layout.ok()) {
    done(Fail(layout.status()));
    return;
  }
  if (absl::Status begun = aggregation->BeginUpdate(client_id); !begun.ok()) {
    done(Fail(begun));
    return;
  }
  // From here on the client id is reserved: Fail (Abandon) gives it back.
  aggregation_ = std::move(aggregation);
  aggregation_id_ = header.aggregation_id();
  client_id_ = client_id;
  ack_level_ = header.ack_level() == v1::DURABLE ? v1::DURABLE : v1::RECEIVED;
  std::optional<double> weight;
  if (header.has_weight()) weight = header.weight();
  // The buffer is allocated once the update has its place in the ingest window: until
  // then the stream reads nothing more, and gRPC flow control holds the sender back.
  auto allocate = [this, layout = *layout, weight, done = std::move(done)](
                      absl::StatusOr<IngestTicket> place) {
    absl::StatusOr<UpdateBuffer> buffer =
        place.ok() ? UpdateBuffer::Allocate(aggregation_->reduction(), layout, weight, memory_budget_,
                                            *std::move(place))
                   : absl::StatusOr<UpdateBuffer>(place.status());
    if (!buffer.ok()) {
      done(Fail(buffer.status()));
      return;
    }
    received_.assign(buffer->num_fields() * 2, 0);
    crc_cursor_ = 0;
    crc_in_order_ = true;
    running_crc_ = 0;
    buffer_.emplace(*std::move(buffer));
    done(absl::OkStatus());
  };
  if (ingest_window_ == nullptr) {
    allocate(IngestTicket());
  } else {
    ingest_window_->Acquire(layout->total_bytes(), std::move(allocate));
  }
}

absl::Status UpdateAssembler::AddChunk(const v1::Chunk& chunk) {
  const absl::Span<const std::byte> data(reinterpret_cast<const std::byte*>(chunk.data().data()),
                                         chunk.data().size());
  return AddChunkPayload(chunk.field(), chunk.section(), chunk.offset(), absl::MakeConstSpan(&data, 1),
                         data.size());
}

absl::Status UpdateAssembler::AddChunk(const RawChunk& chunk) {
  return AddChunkPayload(chunk.field, chunk.section, chunk.offset, chunk.data, chunk.data_bytes);
}

absl::Status UpdateAssembler::AddChunkPayload(uint32_t field, int32_t section, uint64_t offset,
                                              absl::Span<const absl::Span<const std::byte>> data,
                                              size_t data_bytes) {
  if (!active()) {
    return absl::FailedPreconditionError("chunk outside an update: send an update header first");
  }
  if (field >= buffer_->num_fields()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "chunk names field ", field, "; the type has ", buffer_->num_fields(), " fields")));
  }
  if (section != v1::VALUES && section != v1::INDICES) {
    return Fail(absl::InvalidArgumentError("chunk section must be VALUES or INDICES"));
  }
  if (data_bytes > kMaxChunkBytes) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "chunk of ", data_bytes, " bytes exceeds the ", kMaxChunkBytes, "-byte limit")));
  }
  const bool indices = section == v1::INDICES;
  const size_t ordinal = field * 2 + (indices ? 0 : 1);  // wire order: indices, then values
  absl::Span<std::byte> target =
      buffer_->section(field, indices ? UpdateBuffer::Section::kIndices : UpdateBuffer::Section::kValues);
  uint64_t& received = received_[ordinal];
  if (offset != received) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "chunk for ", SectionName(field, indices), " at offset ", offset,
        " is out of order: ", received,
        " bytes of that section were received; send chunks in order, without gaps or overlaps")));
  }
  if (data_bytes > target.size() - received) {
    const uint64_t would_be = received + data_bytes;
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "chunk overruns ", SectionName(field, indices), ": the header declares ", target.size(),
        " bytes, this chunk would bring it to ", would_be, SizeHint(field, indices, target.size(), would_be))));
  }
  // The running checksum follows the sections in wire order; a chunk that arrives out of
  // that order leaves the checksum to End, over the whole buffer.
  while (crc_cursor_ < received_.size() && received_[crc_cursor_] == SectionSize(crc_cursor_)) ++crc_cursor_;
  const bool checksum_here = crc_in_order_ && crc_cursor_ == ordinal;
  if (!checksum_here && data_bytes > 0) crc_in_order_ = false;
  std::byte* out = target.data() + received;
  for (absl::Span<const std::byte> piece : data) {
    if (piece.empty()) continue;
    std::memcpy(out, piece.data(), piece.size());
    // Read back while the piece is still in cache: the payload crosses memory once.
    if (checksum_here) running_crc_ = Crc32cExtend(running_crc_, out, piece.size());
    out += piece.size();
  }
  received += data_bytes;
  metrics_.payload_bytes.Increment(static_cast<double>(data_bytes));
  return absl::OkStatus();
}

uint64_t UpdateAssembler::total_bytes() {
  uint64_t total = 0;
  for (size_t ordinal = 0; ordinal < received_.size(); ++ordinal) total += SectionSize(ordinal);
  return total;
}

uint64_t UpdateAssembler::committed_bytes() const {
  uint64_t committed = 0;
  for (uint64_t received : received_) committed += received;
  return committed;
}

absl::Span<std::byte> UpdateAssembler::WirePiece(uint64_t offset) {
  for (size_t ordinal = 0; ordinal < received_.size(); ++ordinal) {
    const uint64_t size = SectionSize(ordinal);
    if (offset < size) {
      return buffer_->section(ordinal / 2, ordinal % 2 == 0 ? UpdateBuffer::Section::kIndices
                                                            : UpdateBuffer::Section::kValues)
          .subspan(offset);
    }
    offset -= size;
  }
  return {};
}

void UpdateAssembler::CommitThrough(uint64_t end) {
  const uint64_t before = committed_bytes();
  for (size_t ordinal = 0; ordinal < received_.size(); ++ordinal) {
    const uint64_t size = SectionSize(ordinal);
    received_[ordinal] = std::min(end, size);
    end -= received_[ordinal];
  }
  // The pieces were checksummed as they arrived, each on its own: End checksums the whole.
  crc_in_order_ = false;
  metrics_.payload_bytes.Increment(static_cast<double>(committed_bytes() - before));
}

uint64_t UpdateAssembler::SectionSize(size_t ordinal) {
  return buffer_->section(ordinal / 2, ordinal % 2 == 0 ? UpdateBuffer::Section::kIndices
                                                        : UpdateBuffer::Section::kValues).size();
}

absl::Status UpdateAssembler::End(const v1::UpdateEnd& end,
                                  std::function<void(absl::StatusOr<Counted>)> done) {
  if (!active()) {
    return absl::FailedPreconditionError("update end without an update: send a header first");
  }
  for (size_t f = 0; f < buffer_->num_fields(); ++f) {
    for (bool indices : {true, false}) {
      const size_t expected =
          buffer_->section(f, indices ? UpdateBuffer::Section::kIndices : UpdateBuffer::Section::kValues).size();
      const uint64_t got = received_[f * 2 + (indices ? 0 : 1)];
      if (got != expected) {
        return Fail(absl::InvalidArgumentError(absl::StrCat(
            "update ended with ", SectionName(f, indices), " incomplete: ", got, " of ", expected,
            " bytes received", SizeHint(f, indices, expected, got))));
      }
    }
  }
  const uint32_t crc = crc_in_order_ ? running_crc_ : buffer_->Crc32c();
  if (crc != end.crc32c()) {
    return Fail(absl::DataLossError(absl::StrCat(
        "update checksum mismatch: sent CRC-32C ", end.crc32c(), ", computed ", crc,
        " over the received bytes; the update was corrupted in transit, send it again")));
  }
  absl::StatusOr<Aggregation::ValidatedUpdate> valid = aggregation_->Validate(std::move(*buffer_));
  buffer_.reset();
  if (!valid.ok()) return Fail(valid.status());
  // From here on the update belongs to the commit; the assembler takes the next one.
  std::shared_ptr<Aggregation> aggregation = std::move(aggregation_);
  aggregation_ = nullptr;
  const bool durable = ack_level_ == v1::DURABLE;
  Aggregation* committing = aggregation.get();
  committing->ClaimAndCommit(
      client_id_, *std::move(valid),
      [aggregation = std::move(aggregation), durable, metrics = &metrics_, started = started_,
       done = std::move(done)](absl::StatusOr<int64_t> counted) {
        if (!counted.ok()) {
          CountRejection(*metrics, counted.status());
          done(counted.status());
          return;
        }
        metrics->updates_accepted.Increment();
        metrics->update_latency.Observe(absl::ToDoubleSeconds(absl::Now() - started));
        if (!durable) {
          done(Counted{*counted, v1::RECEIVED});
          return;
        }
        aggregation->WhenDurable([contributions = *counted, done](bool on_disk) {
          done(Counted{contributions, on_disk ? v1::DURABLE : v1::RECEIVED});
        });
      });
  return absl::OkStatus();
}

void UpdateAssembler::Abandon() {
  if (aggregation_ != nullptr) aggregation_->AbandonUpdate(client_id_);
  aggregation_ = nullptr;
  buffer_.reset();
}

std::string UpdateAssembler::SectionName(size_t field, bool indices) const {
  const FieldSpec& spec = aggregation_->reduction().fields()[field];
  return absl::StrCat("field '", spec.path, "' (", spec.type.ToString(), ", field ", field, ") ",
                      indices ? (spec.encoding == Encoding::kRowSparse ? "row ids" : "indices") : "values");
}

std::string UpdateAssembler::SizeHint(size_t field, bool indices, uint64_t declared, uint64_t sent) const {
  if (declared == 0 || sent == 0 || declared == sent) return "";
  const FieldSpec& spec = aggregation_->reduction().fields()[field];
  if (!indices && spec.value_encoding.encoded()) {
    return absl::StrCat(" (the field's values are encoded as ", spec.value_encoding.ToString(), ": ", declared,
                        " bytes for ",
                        spec.encoding == Encoding::kDense ? absl::StrCat("its ", spec.type.num_elements(), " elements")
                                                          : "the values the header's nnz declares",
                        "; docs/PROTOCOL.md, \"Encoded values\")");
  }
  const size_t element = indices ? sizeof(int64_t) : DTypeSize(spec.type.dtype);
  const std::string element_type = indices ? std::string("int64") : std::string(DTypeName(spec.type.dtype));
  if (sent % declared == 0 && sent / declared <= 8) {
    return absl::StrCat(" (", sent / declared, "x the declared size: were ", element * (sent / declared),
                        "-byte elements sent where the field declares ", element, "-byte ", element_type,
                        "? convert the array to ", element_type, " before sending)");
  }
  if (declared % sent == 0 && declared / sent <= 8 && element % (declared / sent) == 0) {
    return absl::StrCat(" (1/", declared / sent, " of the declared size: were ", element / (declared / sent),
                        "-byte elements sent where the field declares ", element, "-byte ", element_type,
                        "? convert the array to ", element_type, " before sending)");
  }
  return "";
}

absl::Status UpdateAssembler::Fail(absl::Status status) {
  Abandon();
  CountRejection(metrics_, status);
  return status;
}

void UpdateAssembler::CountRejection(ServiceMetrics& metrics, const absl::Status& status) {
  metrics.updates_rejected.WithLabels({absl::StatusCodeToString(status.code())}).Increment();
}

}  // namespace fedagg
