// UpdateBuffer: the memory one incoming update lands in, exactly once. Sized from the
// update's header (per field: nnz for the sparse family), aligned for every dtype; chunks
// are written straight into it, and view() presents it to the validator and the
// reduction without another copy.
#ifndef FEDAGG_SERVICE_CORE_UPDATE_BUFFER_H_
#define FEDAGG_SERVICE_CORE_UPDATE_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "service/core/field_value.h"
#include "service/core/large_allocation.h"
#include "service/core/memory_budget.h"
#include "service/core/reduction_spec.h"

namespace fedagg {

class UpdateBuffer {
 public:
  enum class Section : uint8_t { kValues = 1, kIndices = 2 };

  // `nnz[f]` is the number of entries (sparse) or rows (row-sparse) of field f; ignored for
  // dense fields. INVALID_ARGUMENT when the sizes are impossible for the spec or the
  // update would exceed `max_bytes`; RESOURCE_EXHAUSTED when `budget` (optional) cannot
  // hold it. Nothing is allocated on error.
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

 private:
  struct FieldStorage {
    LargeAllocation indices;  // int64 values
    LargeAllocation values;   // aligned for any dtype
  };
  std::vector<FieldStorage> fields_;
  UpdateView view_;
  uint64_t total_bytes_ = 0;
  MemoryReservation memory_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_UPDATE_BUFFER_H_
