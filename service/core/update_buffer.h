// UpdateBuffer: the memory one incoming update lands in, exactly once. Sized from the
// update's header (per field: nnz for the sparse family), aligned for every dtype; chunks
// are written straight into it, and view() presents it to the validator and the
// reduction without another copy. A buffer may hold its update's place in the node's
// IngestWindow: the place is given back after the memory, when the buffer is freed.
#ifndef FEDAGG_SERVICE_CORE_UPDATE_BUFFER_H_
#define FEDAGG_SERVICE_CORE_UPDATE_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "service/core/field_value.h"
#include "service/core/ingest_window.h"
#include "service/core/large_allocation.h"
#include "service/core/memory_budget.h"
#include "service/core/reduction_spec.h"

namespace fedagg {

class UpdateBuffer {
 public:
  enum class Section : uint8_t { kValues = 1, kIndices = 2 };

  // The sizes of an update's sections, checked against its spec and the size limit.
  class Layout {
   public:
    uint64_t total_bytes() const { return total_bytes_; }

   private:
    friend class UpdateBuffer;
    std::vector<std::pair<uint64_t, uint64_t>> sections_;  // per field: (indices, value bytes)
    uint64_t total_bytes_ = 0;
  };
  // `nnz[f]` is the number of entries (sparse) or rows (row-sparse) of field f; ignored for
  // dense fields. INVALID_ARGUMENT when the sizes are impossible for the spec or the
  // update would exceed `max_bytes`.
  static absl::StatusOr<Layout> Plan(const ReductionSpec& spec, absl::Span<const int64_t> nnz,
                                     uint64_t max_bytes);
  // Allocates a planned update, holding `ticket` until freed. RESOURCE_EXHAUSTED when
  // `budget` (optional) cannot hold it; nothing is allocated then.
  static absl::StatusOr<UpdateBuffer> Allocate(const ReductionSpec& spec, const Layout& layout,
                                               std::optional<double> weight,
                                               MemoryBudget* budget = nullptr,
                                               IngestTicket ticket = {});
  // Plan, then Allocate.
  static absl::StatusOr<UpdateBuffer> Create(const ReductionSpec& spec,
                                             absl::Span<const int64_t> nnz,
                                             std::optional<double> weight, uint64_t max_bytes,
                                             MemoryBudget* budget = nullptr);

  // The writable bytes of one section of one field (empty span for a dense field's indices).
  absl::Span<std::byte> section(size_t field, Section section);
  size_t num_fields() const { return fields_.size(); }
  uint64_t total_bytes() const { return total_bytes_; }
  // CRC-32C over every section in wire order: field 0 indices, field 0 values, field 1 ...
  uint32_t Crc32c() const;

  const UpdateView& view() const { return view_; }
  // Validates the view against `spec` (ValidateAndMarkUpdate: the marks stay in the view).
  absl::Status Validate(const ReductionSpec& spec);
  // A validated update of a spec with differential privacy, clipped in place
  // (update_clipping.h; the view's `clipped` says whether the whole update's bound scaled
  // it). INVALID_ARGUMENT, nothing changed, for an update that cannot be clipped.
  absl::Status Clip(const ReductionSpec& spec);

 private:
  struct FieldStorage {
    LargeAllocation indices;  // int64 values
    LargeAllocation values;   // aligned for any dtype
  };
  // Declared first, so given back last: after the memory below was freed.
  IngestTicket ingest_place_;
  std::vector<FieldStorage> fields_;
  UpdateView view_;
  uint64_t total_bytes_ = 0;
  MemoryReservation memory_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_UPDATE_BUFFER_H_
