// The fedagg.v1.Tier service (parent side).
#include "service/rpc/tier_service.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "service/rpc/grpc_status.h"
#include "service/rpc/push_stream.h"

namespace fedagg {
namespace {

// Largest serialized partial aggregate a child may push.
constexpr uint64_t kMaxPartialBytes = uint64_t{16} << 30;

// The aggregation `id` of `incarnation` (empty: any) that a child means. NOT_FOUND when
// this node holds none, or another incarnation (it restarted without checkpoints and the
// id was created again); UNAVAILABLE on an intermediate aggregator that has not learnt
// the id from its own parent yet.
absl::StatusOr<std::shared_ptr<Aggregation>> FindForChild(const AggregationRegistry& registry,
                                                          const std::string& id,
                                                          const std::string& incarnation) {
  absl::StatusOr<std::shared_ptr<Aggregation>> found = registry.Find(id);
  if (!found.ok()) {
    if (registry.is_intermediate()) {
      return absl::UnavailableError(absl::StrCat(
          "this intermediate aggregator does not know aggregation '", id,
          "' yet (it learns aggregations from its parent); try again shortly"));
    }
    return found.status();
  }
  const std::string& held = (*found)->config().proto.incarnation();
  if (!incarnation.empty() && incarnation != held) {
    return absl::NotFoundError(absl::StrCat(
        "aggregation '", id, "' here is incarnation ", held, ", not ", incarnation,
        ": this server restarted without checkpoints and the id was created again; the "
        "aggregation you mean is gone"));
  }
  return found;
}

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
      MergeAndAnswer();
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
      // The partial is held twice until it is merged: as received, and decoded. Both count
      // in the node's memory budget; a push that would exceed it is refused before a byte
      // is held (the child keeps its delta and pushes it again).
      if (service_.memory_budget != nullptr) {
        absl::StatusOr<MemoryReservation> held = service_.memory_budget->Reserve(
            2 * header_.total_bytes(),
            absl::StrCat("a partial of ", header_.total_bytes(), " bytes from child '", header_.child_id(),
                         "' (held as received and decoded until merged)"));
        if (!held.ok()) {
          Finish(ToGrpcStatus(held.status()));
          return;
        }
        held_ = *std::move(held);
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
  // Merges, then answers — at once, or once a checkpoint holds the partial when the child
  // asked to wait for that.
  void MergeAndAnswer() {
    absl::StatusOr<std::shared_ptr<Aggregation>> merged_into = Merge();
    bytes_ = std::string();  // merged or refused: neither copy is held any longer
    held_ = MemoryReservation();
    if (!merged_into.ok()) {
      Finish(ToGrpcStatus(merged_into.status()));
      return;
    }
    std::shared_ptr<Aggregation> aggregation = *std::move(merged_into);
    if (!header_.wait_durable()) {
      response_->set_durable_sequence(aggregation->DurableChildSequence(header_.child_id()));
      Finish(grpc::Status::OK);
      return;
    }
    std::weak_ptr<Aggregation> weak = aggregation;
    aggregation->WhenDurable([this, weak](bool durable) {
      if (!durable) {
        Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            "the partial was merged but no checkpoint holds it: this aggregator "
                            "stopped, or its backend failed the aggregation (see its status); push it "
                            "again (same sequence) once the aggregator is back"));
        return;
      }
      if (std::shared_ptr<Aggregation> a = weak.lock()) {
        response_->set_durable_sequence(a->DurableChildSequence(header_.child_id()));
      }
      Finish(grpc::Status::OK);
    });
  }

  absl::StatusOr<std::shared_ptr<Aggregation>> Merge() {
    if (first_) return absl::InvalidArgumentError("PushPartial carried no chunk");
    if (bytes_.size() != header_.total_bytes()) {
      return absl::InvalidArgumentError(absl::StrCat("partial incomplete: ", bytes_.size(), " of ",
                                                     header_.total_bytes(), " bytes"));
    }
    absl::StatusOr<std::shared_ptr<Aggregation>> aggregation =
        FindForChild(service_.registry, header_.aggregation_id(), header_.incarnation());
    if (!aggregation.ok()) return aggregation.status();
    if (header_.wait_durable() && !(*aggregation)->checkpointed()) {
      return absl::FailedPreconditionError(
          "the push asks to wait for a checkpoint, but this aggregator writes none "
          "(--checkpoint_dir is not set, or it is an intermediate aggregator); push without wait_durable");
    }
    absl::StatusOr<int64_t> merged = (*aggregation)->MergeChildPartial(
        header_.child_id(), header_.sequence(), header_.final(), bytes_);
    if (!merged.ok()) return merged.status();
    service_.metrics.partials_merged.Increment();
    response_->set_contributions(*merged);
    return *std::move(aggregation);
  }

  ServiceContext& service_;
  v1::PushPartialResponse* response_;
  v1::PartialChunk chunk_;
  v1::PartialChunk header_;
  std::string bytes_;
  MemoryReservation held_;  // for bytes_ and their decoded partial, until the merge
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
      FindForChild(context_.registry, request->aggregation_id(), request->incarnation());
  if (!found.ok()) {
    stream->Close(ToGrpcStatus(found.status()));
    return stream.get();
  }
  std::weak_ptr<PushStream<v1::TierCommand>> weak_stream = stream;
  std::weak_ptr<Aggregation> weak_aggregation = *found;
  const std::string child_id = request->child_id();
  // This join's number, set below. A stream that ends before (a join numbered 0) leaves the
  // child registered, to be waited for until it joins again or its grace period ends.
  auto join = std::make_shared<std::atomic<uint64_t>>(0);
  stream->SetOnDone([weak_aggregation, child_id, join] {
    if (std::shared_ptr<Aggregation> a = weak_aggregation.lock()) a->ChildLeft(child_id, join->load());
  });
  const Aggregation::ChildRegistration registration =
      (*found)->ChildJoined(child_id, [weak_stream](Aggregation::ChildCommand command) {
        if (auto s = weak_stream.lock()) {
          v1::TierCommand message;
          message.set_kind(command == Aggregation::ChildCommand::kSeal ? v1::TierCommand::SEAL
                                                                       : v1::TierCommand::FLUSH);
          s->Push(std::move(message));
        }
      });
  join->store(registration.join);
  // The first command tells the child what this node holds from it, so that after a
  // restart from a checkpoint it pushes the missing deltas again.
  auto command = [&registration, &found](v1::TierCommand::Kind kind) {
    v1::TierCommand message;
    message.set_kind(kind);
    message.set_last_sequence(registration.last_sequence);
    message.set_parent_checkpoints((*found)->checkpointed());
    return message;
  };
  if (registration.sealed) stream->Push(command(v1::TierCommand::SEAL));
  // After registration: once the child reads JOINED, the parent waits for what it acks.
  stream->Push(command(v1::TierCommand::JOINED));
  return stream.get();
}

grpc::ServerReadReactor<v1::PartialChunk>* TierService::PushPartial(
    grpc::CallbackServerContext* context, v1::PushPartialResponse* response) {
  return new PushPartialReactor(context, context_, response);
}

grpc::ServerUnaryReactor* TierService::ClaimClients(grpc::CallbackServerContext* context,
                                                    const v1::ClaimClientsRequest* request,
                                                    v1::ClaimClientsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status auth = context_.authenticator.Check(*context); !auth.ok()) {
    reactor->Finish(ToGrpcStatus(auth));
    return reactor;
  }
  if (request->child_id().empty()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "ClaimClientsRequest.child_id is empty"));
    return reactor;
  }
  absl::StatusOr<std::shared_ptr<Aggregation>> found =
      FindForChild(context_.registry, request->aggregation_id(), request->incarnation());
  if (!found.ok()) {
    reactor->Finish(ToGrpcStatus(found.status()));
    return reactor;
  }
  std::shared_ptr<Aggregation> aggregation = *std::move(found);
  for (const std::string& client_id : request->released_client_ids()) {
    aggregation->ReleaseChildClaim(request->child_id(), client_id);
  }
  const int claims = request->client_ids_size();
  for (int i = 0; i < claims; ++i) response->add_results();
  if (claims == 0) {
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  // Each claim may wait for this node's own parent; the call is answered when the last
  // one is decided — and, on a node that writes checkpoints, once a checkpoint holds the
  // granted ids, so that a restart from it still knows them (docs/PROTOCOL.md 6.4). The
  // request, response and aggregation live until then.
  auto answer = [reactor, request, response, aggregation] {
    bool granted = false;
    for (const v1::ClaimResult& result : response->results()) granted |= result.code() == 0;
    if (!granted || !aggregation->checkpointed()) {
      reactor->Finish(grpc::Status::OK);
      return;
    }
    aggregation->WhenDurable([reactor, request, response, aggregation](bool durable) {
      if (!durable) {
        // No checkpoint will hold the grants: take them back and say so.
        for (int i = 0; i < response->results_size(); ++i) {
          v1::ClaimResult* result = response->mutable_results(i);
          if (result->code() != 0) continue;
          aggregation->ReleaseChildClaim(request->child_id(), request->client_ids(i));
          result->set_code(static_cast<int>(absl::StatusCode::kUnavailable));
          result->set_message("the claim was granted but no checkpoint holds it (the aggregator is stopping, or "
                              "its checkpoints fail); retry shortly, or send the update to another aggregator");
        }
      }
      reactor->Finish(grpc::Status::OK);
    });
  };
  auto remaining = std::make_shared<std::atomic<int>>(claims);
  for (int i = 0; i < claims; ++i) {
    const std::string& client_id = request->client_ids(i);
    if (client_id.empty()) {
      v1::ClaimResult* result = response->mutable_results(i);
      result->set_code(static_cast<int>(absl::StatusCode::kInvalidArgument));
      result->set_message("a claimed client id is empty");
      if (remaining->fetch_sub(1) == 1) answer();
      continue;
    }
    aggregation->ClaimForChild(request->child_id(), client_id,
                               [response, remaining, i, answer](absl::Status granted) {
                                 v1::ClaimResult* result = response->mutable_results(i);
                                 result->set_code(static_cast<int>(granted.code()));
                                 result->set_message(std::string(granted.message()));
                                 if (remaining->fetch_sub(1) == 1) answer();
                               });
  }
  return reactor;
}

}  // namespace fedagg
