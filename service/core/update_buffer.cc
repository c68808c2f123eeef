// UpdateBuffer: aligned per-field storage for one incoming update.
#include "service/core/update_buffer.h"

#include "absl/strings/str_cat.h"
#include "service/core/crc32c.h"
#include "service/core/status_macros.h"
#include "service/core/update_clipping.h"
#include "service/core/update_validator.h"

namespace fedagg {

absl::StatusOr<UpdateBuffer::Layout> UpdateBuffer::Plan(const ReductionSpec& spec,
                                                        absl::Span<const int64_t> nnz,
                                                        uint64_t max_bytes) {
  if (nnz.size() != spec.fields().size()) {
    return absl::InvalidArgumentError(absl::StrCat("update header describes ", nnz.size(),
                                                   " fields but type ",
                                                   spec.value_type().ToString(), " has ",
                                                   spec.fields().size()));
  }
  Layout layout;
  uint64_t total = 0;
  for (size_t f = 0; f < nnz.size(); ++f) {
    const FieldSpec& field = spec.fields()[f];
    const uint64_t element = DTypeSize(field.type.dtype);
    uint64_t indices = 0, value_bytes = 0;
    if (field.encoding == Encoding::kDense) {
      value_bytes = field.value_encoding.encoded() ? field.value_encoding.EncodedBytes(field.type.num_elements())
                                                   : field.type.num_bytes();
    } else {
      // An update cannot hold more entries than there are coordinates (or rows) times a
      // small factor for repeats; the byte limit below is the real bound.
      if (nnz[f] < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("field '", field.path, "': nnz ", nnz[f], " is negative"));
      }
      indices = static_cast<uint64_t>(nnz[f]);
      // Every entry takes its 8-byte index, so the limit bounds the entries whatever their
      // values take (and keeps an encoded section's size from overflowing below).
      const uint64_t row_bytes = static_cast<uint64_t>(field.row_width) * element;
      if (indices > max_bytes / (row_bytes + 8)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "field '", field.path, "': ", indices, " entries exceed the update size limit of ",
            max_bytes, " bytes"));
      }
      value_bytes = field.value_encoding.encoded()
                        ? field.value_encoding.EncodedBytes(static_cast<int64_t>(indices) * field.row_width)
                        : indices * row_bytes;
    }
    total += indices * 8 + value_bytes;
    if (total > max_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("update of at least ", total,
                                                     " bytes exceeds the size limit of ",
                                                     max_bytes, " bytes"));
    }
    layout.sections_.emplace_back(indices, value_bytes);
  }
  layout.total_bytes_ = total;
  return layout;
}

absl::StatusOr<UpdateBuffer> UpdateBuffer::Allocate(const ReductionSpec& spec, const Layout& layout,
                                                    std::optional<double> weight,
                                                    MemoryBudget* budget, IngestTicket ticket) {
  UpdateBuffer buffer;
  const uint64_t total = layout.total_bytes();
  if (budget != nullptr) {
    absl::StatusOr<MemoryReservation> memory =
        budget->Reserve(total, absl::StrCat("an update of ", total, " bytes"));
    if (!memory.ok()) return memory.status();
    buffer.memory_ = *std::move(memory);
  }
  buffer.ingest_place_ = std::move(ticket);
  buffer.fields_.resize(layout.sections_.size());
  buffer.view_.weight = weight;
  for (size_t f = 0; f < layout.sections_.size(); ++f) {
    const FieldSpec& field = spec.fields()[f];
    const auto [indices, value_bytes] = layout.sections_[f];
    FieldStorage& storage = buffer.fields_[f];
    storage.indices = LargeAllocation(indices * sizeof(int64_t));
    storage.values = LargeAllocation(value_bytes);
    buffer.view_.fields.push_back(FieldValue{
        field.encoding, field.type.dtype,
        absl::MakeConstSpan(reinterpret_cast<const int64_t*>(storage.indices.data()), indices),
        absl::MakeConstSpan(storage.values.data(), storage.values.size())});
  }
  buffer.total_bytes_ = total;
  return buffer;
}

absl::StatusOr<UpdateBuffer> UpdateBuffer::Create(const ReductionSpec& spec,
                                                  absl::Span<const int64_t> nnz,
                                                  std::optional<double> weight,
                                                  uint64_t max_bytes, MemoryBudget* budget) {
  absl::StatusOr<Layout> layout = Plan(spec, nnz, max_bytes);
  if (!layout.ok()) return layout.status();
  return Allocate(spec, *layout, weight, budget);
}

absl::Span<std::byte> UpdateBuffer::section(size_t field, Section section) {
  FieldStorage& storage = fields_[field];
  const LargeAllocation& bytes = section == Section::kIndices ? storage.indices : storage.values;
  return absl::MakeSpan(bytes.data(), bytes.size());
}

uint32_t UpdateBuffer::Crc32c() const {
  uint32_t crc = 0;
  for (const FieldStorage& storage : fields_) {
    crc = Crc32cExtend(crc, storage.indices.data(), storage.indices.size());
    crc = Crc32cExtend(crc, storage.values.data(), storage.values.size());
  }
  return crc;
}

absl::Status UpdateBuffer::Validate(const ReductionSpec& spec) { return ValidateAndMarkUpdate(spec, view_); }

absl::Status UpdateBuffer::Clip(const ReductionSpec& spec) {
  std::vector<absl::Span<std::byte>> values;
  values.reserve(fields_.size());
  for (size_t f = 0; f < fields_.size(); ++f) values.push_back(section(f, Section::kValues));
  FEDAGG_ASSIGN_OR_RETURN(view_.clipped, ClipUpdate(spec, view_, values));
  return absl::OkStatus();
}

}  // namespace fedagg
