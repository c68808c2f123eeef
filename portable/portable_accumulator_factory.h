// PortableAccumulatorFactory: a backend made of FieldReducers (field_reducer.h) — the
// thrust-omp backend (omp_backend.h) and the cuda backend (cuda/cuda_backend.h) are two
// instances. Each accumulator keeps its state in the reducer's memory (the GPU, for cuda)
// and adapts it to FieldAccumulator: reducer outcomes become absl::Status (device out of
// memory: RESOURCE_EXHAUSTED); serialized partials are checked and reports are computed
// by the CPU accumulator of the same field over the copied-back state, so the format and
// the final divisions are exactly the CPU backend's.
#ifndef FEDAGG_PORTABLE_PORTABLE_ACCUMULATOR_FACTORY_H_
#define FEDAGG_PORTABLE_PORTABLE_ACCUMULATOR_FACTORY_H_

#include <string>

#include "portable/field_reducer.h"
#include "service/core/accumulator_factory.h"

namespace fedagg {

class PortableAccumulatorFactory final : public AccumulatorFactory {
 public:
  PortableAccumulatorFactory(std::string name, portable::ReducerMakers makers)
      : name_(std::move(name)), makers_(makers) {}

  absl::string_view name() const override { return name_; }
  std::unique_ptr<FieldAccumulator> Make(const FieldSpec& field) const override;

 private:
  std::string name_;
  portable::ReducerMakers makers_;
};

// The reducer spec of a field (exposed for tests).
portable::ReducerSpec ReducerSpecOf(const FieldSpec& field);

}  // namespace fedagg

#endif  // FEDAGG_PORTABLE_PORTABLE_ACCUMULATOR_FACTORY_H_
