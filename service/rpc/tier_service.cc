// The fedagg.v1.Tier service (parent side).
#include "service/rpc/tier_service.h"

#include "absl/strings/str_cat.h"
#include "service/rpc/grpc_status.h"
#include "service/rpc/push_stream.h"

namespace fedagg {
namespace {

// Largest serialized partial aggregate a child may push.
constexpr uint64_t kMaxPartialBytes = uint64_t{16} << 30;

// Reassembles one pushed partial, then merges it when the child half-closes.
class PushPartialReactor final : public grpc::ServerReadReactor<v1::PartialChunk> {
 public:
  PushPartialReactor(grpc::CallbackServerContext* context, ServiceContext& service,
                     v1::PushPartialResponse* response)
      : service_(service), response_(response) {
    if (absl::Status auth = service.authenticator.Check(*context); !auth.ok()) {
      Finish(ToGrpcStatus(auth));
      return;
    }
    StartRead(&chunk_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(ToGrpcStatus(Merge()));
      return;
    }
    if (first_) {
      first_ = false;
      header_ = chunk_;
      header_.clear_data();
      if (header_.total_bytes() > kMaxPartialBytes) {
        Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                            absl::StrCat("partial of ", header_.total_bytes(),
                                         " bytes exceeds the limit of ", kMaxPartialBytes)));
        return;
      }
      if (header_.child_id().empty() || header_.sequence() == 0) {
        Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "the first PartialChunk must carry child_id and a sequence >= 1"));
        return;
      }
      // Grow with the data actually received, not with what the header claims.
      bytes_.reserve(std::min<uint64_t>(header_.total_bytes(), uint64_t{64} << 20));
    }
    if (bytes_.size() + chunk_.data().size() > header_.total_bytes()) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "partial chunks exceed the declared total_bytes"));
      return;
    }
    bytes_.append(chunk_.data());
    StartRead(&chunk_);
  }

  void OnDone() override { delete this; }

 private:
  absl::Status Merge() {
    if (first_) return absl::InvalidArgumentError("PushPartial carried no chunk");
    if (bytes_.size() != header_.total_bytes()) {
      return absl::InvalidArgumentError(absl::StrCat("partial incomplete: ", bytes_.size(), " of ",
                                                     header_.total_bytes(), " bytes"));
    }
    absl::StatusOr<std::shared_ptr<Aggregation>> aggregation =
        service_.registry.Find(header_.aggregation_id());
    if (!aggregation.ok()) return aggregation.status();
    absl::StatusOr<int64_t> merged = (*aggregation)->MergeChildPartial(
        header_.child_id(), header_.sequence(), header_.final(), bytes_);
    if (!merged.ok()) return merged.status();
    service_.metrics.partials_merged.Increment();
    response_->set_contributions(*merged);
    return absl::OkStatus();
  }

  ServiceContext& service_;
  v1::PushPartialResponse* response_;
  v1::PartialChunk chunk_;
  v1::PartialChunk header_;
  std::string bytes_;
  bool first_ = true;
};

}  // namespace

grpc::ServerWriteReactor<v1::TierCommand>* TierService::Join(grpc::CallbackServerContext* context,
                                                             const v1::JoinRequest* request) {
  std::shared_ptr<PushStream<v1::TierCommand>> stream = PushStream<v1::TierCommand>::Create();
  if (absl::Status auth = context_.authenticator.Check(*context); !auth.ok()) {
    stream->Close(ToGrpcStatus(auth));
    return stream.get();
  }
  if (request->child_id().empty()) {
    stream->Close(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "JoinRequest.child_id is empty"));
    return stream.get();
  }
  absl::StatusOr<std::shared_ptr<Aggregation>> found =
      context_.registry.Find(request->aggregation_id());
  if (!found.ok()) {
    stream->Close(ToGrpcStatus(found.status()));
    return stream.get();
  }
  std::weak_ptr<PushStream<v1::TierCommand>> weak_stream = stream;
  std::weak_ptr<Aggregation> weak_aggregation = *found;
  const std::string child_id = request->child_id();
  stream->SetOnDone([weak_aggregation, child_id] {
    if (std::shared_ptr<Aggregation> a = weak_aggregation.lock()) a->ChildLeft(child_id);
  });
  (*found)->ChildJoined(child_id, [weak_stream](Aggregation::ChildCommand command) {
    if (auto s = weak_stream.lock()) {
      v1::TierCommand message;
      message.set_kind(command == Aggregation::ChildCommand::kSeal ? v1::TierCommand::SEAL
                                                                   : v1::TierCommand::FLUSH);
      s->Push(std::move(message));
    }
  });
  // After registration: once the child reads JOINED, the parent waits for what it acks.
  v1::TierCommand joined;
  joined.set_kind(v1::TierCommand::JOINED);
  stream->Push(std::move(joined));
  return stream.get();
}

grpc::ServerReadReactor<v1::PartialChunk>* TierService::PushPartial(
    grpc::CallbackServerContext* context, v1::PushPartialResponse* response) {
  return new PushPartialReactor(context, context_, response);
}

}  // namespace fedagg
