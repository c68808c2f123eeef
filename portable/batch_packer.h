// BatchPacker: turns a batch in host memory (HostBatch: one pointer per update) into the
// staging layout a StagedFieldReducer reads (StagedBatch), split into parts that each fit
// one staging-ring slot, as the list of spans a copy engine moves into the slot's device
// memory. The updates' values and indices go to the device straight from where they were
// received (one span per update and array); only what the layout adds (weights and each
// update's first entry) and the entries of an update that had to be reordered are written
// into the slot's host memory first (which update an entry belongs to, the staged reducer
// finds from the offsets on the device). Host logic only, shared by every device backend.
//   dense    a part is a rectangle of the [updates, row_width] batch: all rows when a slot
//            holds them (a batch larger than a slot is cut into row ranges, and a row
//            larger than a slot into column ranges); parts go row range by row range, so
//            every column still adds its rows in batch order and the sums are bit-for-bit
//            those of one part; a quantized field's column ranges are whole blocks (but
//            the last), and a part holds each row's codes and, apart, its scales, both
//            straight from the update's section;
//   entries  (kScatter / kUnion) a part holds whole updates, in order; an update larger
//            than a slot is cut into entry ranges after its entries are stably ordered by
//            index on the host, and never inside a run of one index, so an update that
//            repeats an index still counts once for it.
// Indices are not read on the host (but to order an update cut into parts): the staged
// reducer checks them against the field on the device (thrust_field_reducer.h).
#ifndef FEDAGG_PORTABLE_BATCH_PACKER_H_
#define FEDAGG_PORTABLE_BATCH_PACKER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "portable/copy_engine.h"
#include "portable/field_reducer.h"

namespace fedagg::portable {

class BatchPacker {
 public:
  // A run of one update's entries [first, first + count) in a part; `order` (when not
  // null) lists that update's entries by index, and the run is positions of that order.
  struct Piece {
    int64_t update = 0;
    int64_t first = 0;
    int64_t count = 0;
    const int64_t* order = nullptr;
  };
  // One slot's worth: dense: rows [row_begin, row_end) x columns [column_begin,
  // column_end); entries: its pieces.
  struct Part {
    int64_t row_begin = 0, row_end = 0;
    int64_t column_begin = 0, column_end = 0;
    std::vector<Piece> pieces;
  };
  struct Plan {
    std::vector<Part> parts;
    std::vector<std::vector<int64_t>> orders;  // of the updates cut into several parts
  };
  // A packed part: its shape, and where its arrays lie as byte offsets from the slot's
  // start (kDense parts have values and weights only).
  struct Layout {
    int64_t updates = 0, entries = 0, column_begin = 0, columns = 0;
    size_t values_at = 0, indices_at = 0, update_offsets_at = 0, weights_at = 0;
    size_t scales_at = 0;  // quantized kDense parts
    bool with_scales = false;
    size_t bytes = 0;  // of the slot used
    bool with_entries = false;  // kScatter / kUnion
    bool updates_ascend = false;  // every piece's indices ascend (as received, or ordered here)
  };

  explicit BatchPacker(const ReducerSpec& spec) : spec_(spec) {}

  // The parts of `batch` for slots of `slot_bytes`. RESOURCE_EXHAUSTED when one entry (or
  // one run of an index) alone does not fit a slot, naming --staging_slot_mib.
  absl::StatusOr<Plan> MakePlan(const HostBatch& batch, size_t slot_bytes) const;
  // Lays `part` out for a slot (of at least the plan's slot_bytes): writes what must be
  // packed into `slot_host` (the slot's host memory), appends to `spans` what the copy
  // moves into the slot's device memory (spans that point into `batch`'s updates, which
  // must then stay unchanged until the copy is done), and returns the layout.
  Layout Pack(const HostBatch& batch, const Part& part, void* slot_host, std::vector<CopySpan>* spans) const;
  // The part's batch once the slot's bytes are at `base` (device memory); `host_base`, the
  // slot's host memory Pack wrote (null: none), gives the reducer the offsets on the host.
  static StagedBatch Locate(const Layout& layout, const void* base, const void* host_base = nullptr);

 private:
  int64_t EntryWidth() const { return spec_.kind == ReducerKind::kScatter ? spec_.row_width : 1; }
  // kDense: the columns a part's width is a multiple of (1; a quantized field's block), and
  // the bytes one row of them takes (a plain value; a block's codes and scale).
  int64_t DenseUnitColumns() const;
  size_t DenseUnitBytes() const;
  Plan PlanDense(const HostBatch& batch, size_t slot_bytes) const;
  absl::StatusOr<Plan> PlanEntries(const HostBatch& batch, size_t slot_bytes) const;

  const ReducerSpec spec_;
};

}  // namespace fedagg::portable

#endif  // FEDAGG_PORTABLE_BATCH_PACKER_H_
