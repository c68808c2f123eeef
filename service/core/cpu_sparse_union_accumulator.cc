// CPU accumulator for sparse_sum_sparse (sorted, coalesced union of coordinates).
#include "service/core/cpu_sparse_union_accumulator.h"

#include <algorithm>
#include <bit>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "service/core/cpu_kernels.h"

namespace fedagg {

template <typename Acc>
absl::Status CpuSparseUnionAccumulator<Acc>::AccumulateBatch(absl::Span<const FieldValue* const> values,
                                                     absl::Span<const double>) {
  struct Entry {
    int64_t index;
    uint32_t update;  // position in the batch: counts an update once per index
    Acc value;
  };
  size_t total = 0;
  for (const FieldValue* value : values) total += value->indices.size();
  if (total == 0) return absl::OkStatus();
  std::vector<Entry> entries;
  entries.reserve(total);
  cpu::DispatchDType(field_.type.dtype, [&](auto tag) {
    using In = typename decltype(tag)::type;
    for (size_t i = 0; i < values.size(); ++i) {
      const In* in = reinterpret_cast<const In*>(values[i]->values.data());
      for (size_t k = 0; k < values[i]->indices.size(); ++k) {
        entries.push_back(Entry{values[i]->indices[k], static_cast<uint32_t>(i),
                                cpu::Widen<Acc>(in[k])});
      }
    }
  });
  // Stable LSD radix sort by index, 8 bits a pass, only over the bits an index of this
  // field can have: equal indices keep batch order, so sums keep it too.
  std::vector<Entry> scratch(entries.size());
  const int index_bits = std::bit_width(static_cast<uint64_t>(std::max<int64_t>(field_.rows - 1, 1)));
  for (int shift = 0; shift < index_bits; shift += 8) {
    size_t offsets[257] = {};
    for (const Entry& e : entries) ++offsets[((static_cast<uint64_t>(e.index) >> shift) & 0xff) + 1];
    for (int b = 0; b < 256; ++b) offsets[b + 1] += offsets[b];
    for (const Entry& e : entries) scratch[offsets[(static_cast<uint64_t>(e.index) >> shift) & 0xff]++] = e;
    entries.swap(scratch);
  }
  Coalesced batch;
  for (size_t k = 0; k < entries.size();) {
    const int64_t index = entries[k].index;
    Acc sum = Acc{0};
    int64_t count = 0;
    uint32_t last_update = 0;
    for (; k < entries.size() && entries[k].index == index; ++k) {
      sum = cpu::Add(sum, entries[k].value);
      if (count == 0 || entries[k].update != last_update) ++count;
      last_update = entries[k].update;
    }
    batch.indices.push_back(index);
    batch.values.push_back(sum);
    batch.counts.push_back(count);
  }
  MergeSorted(batch);
  return absl::OkStatus();
}

template <typename Acc>
void CpuSparseUnionAccumulator<Acc>::MergeSorted(const Coalesced& other) {
  Coalesced merged;
  const size_t capacity = state_.indices.size() + other.indices.size();
  merged.indices.reserve(capacity);
  merged.values.reserve(capacity);
  merged.counts.reserve(capacity);
  size_t a = 0, b = 0;
  auto take = [&merged](const Coalesced& from, size_t i) {
    merged.indices.push_back(from.indices[i]);
    merged.values.push_back(from.values[i]);
    merged.counts.push_back(from.counts[i]);
  };
  while (a < state_.indices.size() && b < other.indices.size()) {
    if (state_.indices[a] < other.indices[b]) {
      take(state_, a++);
    } else if (other.indices[b] < state_.indices[a]) {
      take(other, b++);
    } else {
      merged.indices.push_back(state_.indices[a]);
      merged.values.push_back(cpu::Add(state_.values[a], other.values[b]));
      merged.counts.push_back(state_.counts[a] + other.counts[b]);
      ++a;
      ++b;
    }
  }
  for (; a < state_.indices.size(); ++a) take(state_, a);
  for (; b < other.indices.size(); ++b) take(other, b);
  state_ = std::move(merged);
}

template <typename Acc>
absl::Status CpuSparseUnionAccumulator<Acc>::MergeWith(const FieldAccumulator& other) {
  MergeSorted(static_cast<const CpuSparseUnionAccumulator<Acc>&>(other).state_);
  return absl::OkStatus();
}

template <typename Acc>
absl::Status CpuSparseUnionAccumulator<Acc>::SerializeTo(ByteWriter& out) const {
  out.PutArray(state_.indices.data(), state_.indices.size());
  out.PutArray(state_.values.data(), state_.values.size());
  out.PutArray(state_.counts.data(), state_.counts.size());
  return absl::OkStatus();
}

template <typename Acc>
absl::Status CpuSparseUnionAccumulator<Acc>::DeserializeFrom(ByteReader& in,
                                                             int64_t contributions) {
  const std::string what = absl::StrCat("field '", field_.path, "'");
  Coalesced read;
  if (absl::Status s = in.GetArray(&read.indices); !s.ok()) return s;
  const uint64_t nnz = read.indices.size();
  // Bound the allocation by what the input can hold before resizing.
  if (nnz > static_cast<uint64_t>(field_.rows)) {
    return absl::DataLossError(absl::StrCat("partial aggregate: ", what, " has ", nnz,
                                            " entries but only ", field_.rows, " coordinates"));
  }
  read.values.resize(nnz);
  read.counts.resize(nnz);
  if (absl::Status s = in.GetArrayExact(read.values.data(), nnz, what + " values"); !s.ok()) return s;
  if (absl::Status s = in.GetArrayExact(read.counts.data(), nnz, what + " counts"); !s.ok()) return s;
  for (size_t k = 0; k < nnz; ++k) {
    const int64_t index = read.indices[k];
    if (index < 0 || index >= field_.rows || (k > 0 && index <= read.indices[k - 1])) {
      return absl::DataLossError(absl::StrCat("partial aggregate: ", what, " index ", index,
                                              " at entry ", k,
                                              " is out of range or not strictly increasing"));
    }
    if (read.counts[k] < 1 || read.counts[k] > contributions) {
      return absl::DataLossError(absl::StrCat("partial aggregate: ", what, " entry ", k,
                                              " has count ", read.counts[k], " with ",
                                              contributions, " contributions"));
    }
  }
  state_ = std::move(read);
  return absl::OkStatus();
}

template <typename Acc>
absl::StatusOr<ReportedField> CpuSparseUnionAccumulator<Acc>::Report(int64_t, double) const {
  const size_t nnz = state_.indices.size();
  ReportedField out{field_.path, field_.intrinsic,
                    Tensor{field_.result_dtype, {static_cast<int64_t>(nnz)}, {}}};
  out.value.bytes.resize(nnz * sizeof(Acc));
  std::copy(state_.values.begin(), state_.values.end(), out.value.mutable_values<Acc>().begin());
  out.indices = state_.indices;
  if (field_.report_counts) out.counts = state_.counts;
  return out;
}

template <typename Acc>
uint64_t CpuSparseUnionAccumulator<Acc>::MemoryBytes() const {
  return state_.indices.capacity() * sizeof(state_.indices[0]) +
         state_.values.capacity() * sizeof(state_.values[0]) +
         state_.counts.capacity() * sizeof(state_.counts[0]);
}

template class CpuSparseUnionAccumulator<float>;
template class CpuSparseUnionAccumulator<double>;
template class CpuSparseUnionAccumulator<int64_t>;

}  // namespace fedagg
