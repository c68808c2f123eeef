// The fedagg.v1.Cohorts service: one reactor per JoinCohort stream.
#include "service/rpc/cohort_service.h"

#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "service/core/mutex.h"
#include "service/rpc/grpc_status.h"

namespace fedagg {
namespace {

class CohortReactor;

// How SecureCohorts reaches a stream: it may outlive the reactor (a cohort keeps its
// members), so it forwards only while the reactor is there.
class StreamMember final : public SecureCohorts::Member {
 public:
  explicit StreamMember(CohortReactor* reactor) : reactor_(reactor) {}
  void Send(const v1::CohortResponse& response) override;
  void Finish(const absl::Status& status) override;
  void Detach() {
    MutexLock lock(&mu_);
    reactor_ = nullptr;
  }

 private:
  Mutex mu_;
  CohortReactor* reactor_ ABSL_GUARDED_BY(mu_);
};

class CohortReactor final : public grpc::ServerBidiReactor<v1::CohortRequest, v1::CohortResponse> {
 public:
  CohortReactor(grpc::CallbackServerContext* context, ServiceContext& service)
      : service_(service), member_(std::make_shared<StreamMember>(this)) {
    if (absl::Status auth = service_.authenticator.Check(*context); !auth.ok()) {
      Finish(ToGrpcStatus(auth));
      return;
    }
    StartRead(&request_);
  }

  // Queues a response; writes go out one at a time, in order.
  void Enqueue(const v1::CohortResponse& response) {
    MutexLock lock(&mu_);
    if (finishing_.has_value()) return;
    outgoing_.push_back(response);
    WriteNextLocked();
  }
  // Ends the call with `status` once what is queued is written.
  void FinishWith(const absl::Status& status) {
    MutexLock lock(&mu_);
    if (finishing_.has_value()) return;
    finishing_ = status;
    WriteNextLocked();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the client sent its last message (or left: OnCancel says so)
    if (request_.has_advertise()) {
      Advertise(request_.advertise());
      return;
    }
    absl::Status handled = Handle(request_);
    if (!handled.ok()) {
      Leave();
      FinishWith(handled);
      return;
    }
    StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    MutexLock lock(&mu_);
    writing_ = false;
    if (ok) {
      outgoing_.pop_front();
    } else {
      outgoing_.clear();  // the client is gone; the call still ends with Finish
    }
    WriteNextLocked();
  }

  void OnCancel() override {
    Leave();
    FinishWith(absl::CancelledError("the client left"));
  }

  void OnDone() override {
    member_->Detach();
    Leave();
    delete this;
  }

 private:
  // Stage messages after the advertise.
  absl::Status Handle(const v1::CohortRequest& request) {
    std::shared_ptr<Aggregation> aggregation;
    std::string client_id;
    {
      MutexLock lock(&mu_);
      aggregation = aggregation_;
      client_id = client_id_;
    }
    if (aggregation == nullptr) {
      return absl::FailedPreconditionError("the stream's first message advertises the client's keys");
    }
    SecureCohorts& cohorts = *aggregation->secure_cohorts();
    if (request.has_shares()) return cohorts.ShareKeys(client_id, request.shares(), absl::Now());
    if (request.has_unmasking()) return cohorts.Unmasking(client_id, request.unmasking(), absl::Now());
    return absl::InvalidArgumentError("a CohortRequest with no message in it");
  }

  // The first message: the aggregation is found (an intermediate may learn it from its
  // parent first) and the client joins its cohorts; reading goes on once it has.
  void Advertise(v1::AdvertiseKeys keys) {
    if (advertised_) {
      Leave();
      FinishWith(absl::FailedPreconditionError("advertise is the stream's first message, once"));
      return;
    }
    advertised_ = true;
    const std::string id = keys.aggregation_id();
    service_.registry.GetAsync(id, [this, keys = std::move(keys)](absl::StatusOr<std::shared_ptr<Aggregation>> found) {
      absl::Status joined = Join(found, keys);
      if (!joined.ok()) {
        FinishWith(joined);
        return;
      }
      StartRead(&request_);
    });
  }

  absl::Status Join(const absl::StatusOr<std::shared_ptr<Aggregation>>& found, const v1::AdvertiseKeys& keys) {
    if (!found.ok()) return found.status();
    if ((*found)->secure_cohorts() == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "aggregation '", keys.aggregation_id(), "' is not a secure aggregation: send its updates plainly"));
    }
    {
      MutexLock lock(&mu_);
      aggregation_ = *found;
      client_id_ = keys.client_id();
    }
    absl::Status advertised = (*found)->secure_cohorts()->Advertise(keys.client_id(), keys, member_, absl::Now());
    if (!advertised.ok()) {
      MutexLock lock(&mu_);
      aggregation_ = nullptr;  // not a member: nothing to leave
    }
    return advertised;
  }

  void Leave() {
    std::shared_ptr<Aggregation> aggregation;
    std::string client_id;
    {
      MutexLock lock(&mu_);
      aggregation = aggregation_;
      client_id = client_id_;
    }
    if (aggregation != nullptr) aggregation->secure_cohorts()->Left(client_id, absl::Now());
  }

  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || done_) return;
    if (!outgoing_.empty()) {
      writing_ = true;
      StartWrite(&outgoing_.front());
      return;
    }
    if (finishing_.has_value()) {
      done_ = true;
      Finish(ToGrpcStatus(*finishing_));
    }
  }

  ServiceContext& service_;
  const std::shared_ptr<StreamMember> member_;
  v1::CohortRequest request_;
  bool advertised_ = false;  // the reading side's only

  Mutex mu_;
  std::shared_ptr<Aggregation> aggregation_ ABSL_GUARDED_BY(mu_);  // once the advertise is taken
  std::string client_id_ ABSL_GUARDED_BY(mu_);
  std::deque<v1::CohortResponse> outgoing_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<absl::Status> finishing_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

void StreamMember::Send(const v1::CohortResponse& response) {
  MutexLock lock(&mu_);
  if (reactor_ != nullptr) reactor_->Enqueue(response);
}

void StreamMember::Finish(const absl::Status& status) {
  MutexLock lock(&mu_);
  if (reactor_ != nullptr) reactor_->FinishWith(status);
}

}  // namespace

grpc::ServerBidiReactor<v1::CohortRequest, v1::CohortResponse>* CohortService::JoinCohort(
    grpc::CallbackServerContext* context) {
  return new CohortReactor(context, context_);
}

}  // namespace fedagg
