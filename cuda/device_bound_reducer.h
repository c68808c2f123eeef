// DeviceBoundReducer: a FieldReducer that runs another with one CUDA device current — set
// before each call (and before the reducer is destroyed, so its device memory is freed on
// its device), the calling thread's previous device restored after. The cuda backend
// wraps each device's reducers in it when it reduces on any device but device 0 alone
// (cuda_backend.cc); a failure to switch devices is the call's kInternal outcome.
#ifndef FEDAGG_CUDA_DEVICE_BOUND_REDUCER_H_
#define FEDAGG_CUDA_DEVICE_BOUND_REDUCER_H_

#include <memory>
#include <string>
#include <utility>

#include <cuda_runtime_api.h>

#include "portable/field_reducer.h"

namespace fedagg::cuda {

template <typename Acc>
class DeviceBoundReducer final : public portable::FieldReducer<Acc> {
 public:
  DeviceBoundReducer(int device, std::unique_ptr<portable::FieldReducer<Acc>> inner)
      : device_(device), inner_(std::move(inner)) {}
  ~DeviceBoundReducer() override {
    static_cast<void>(OnDevice([&] {
      inner_.reset();
      return portable::Outcome{};
    }));
  }

  portable::Outcome Accumulate(const portable::HostBatch& batch) override {
    return OnDevice([&] { return inner_->Accumulate(batch); });
  }
  portable::Outcome Merge(const portable::FieldReducer<Acc>& other) override {
    return OnDevice([&] { return inner_->Merge(*static_cast<const DeviceBoundReducer&>(other).inner_); });
  }
  portable::Outcome Save(portable::HostState<Acc>* out) const override {
    return OnDevice([&] { return inner_->Save(out); });
  }
  portable::Outcome SaveResult(const portable::ResultRequest& request) const override {
    return OnDevice([&] { return inner_->SaveResult(request); });
  }
  portable::Outcome Load(const portable::HostState<Acc>& in) override {
    return OnDevice([&] { return inner_->Load(in); });
  }
  uint64_t HostBytes() const override { return inner_->HostBytes(); }

  // Runs fn() (returning an Outcome) with this reducer's device current.
  template <typename Fn>
  portable::Outcome OnDevice(Fn&& fn) const {
    int previous = 0;
    if (const cudaError_t error = cudaGetDevice(&previous); error != cudaSuccess) return Failed("cudaGetDevice", error);
    if (const cudaError_t error = cudaSetDevice(device_); error != cudaSuccess) return Failed("cudaSetDevice", error);
    portable::Outcome outcome = fn();
    if (const cudaError_t error = cudaSetDevice(previous); error != cudaSuccess && outcome.ok()) {
      return Failed("cudaSetDevice (back)", error);
    }
    return outcome;
  }

  int device() const { return device_; }
  portable::FieldReducer<Acc>& inner() const { return *inner_; }

 private:
  portable::Outcome Failed(const char* call, cudaError_t error) const {
    return portable::Outcome{portable::Outcome::Code::kInternal,
                             std::string(call) + " for device " + std::to_string(device_) +
                                 " failed: " + cudaGetErrorString(error)};
  }

  const int device_;
  std::unique_ptr<portable::FieldReducer<Acc>> inner_;
};

// `make` with every reducer it makes bound to `device`.
template <typename Acc>
portable::ReducerMaker<Acc> BindToDevice(int device, portable::ReducerMaker<Acc> make) {
  return [device, make = std::move(make)](const portable::ReducerSpec& spec) {
    return std::unique_ptr<portable::FieldReducer<Acc>>(new DeviceBoundReducer<Acc>(device, make(spec)));
  };
}

inline portable::ReducerMakers BindToDevice(int device, const portable::ReducerMakers& makers) {
  return portable::ReducerMakers{BindToDevice(device, makers.f32), BindToDevice(device, makers.f64),
                                 BindToDevice(device, makers.i64)};
}

}  // namespace fedagg::cuda

#endif  // FEDAGG_CUDA_DEVICE_BOUND_REDUCER_H_
