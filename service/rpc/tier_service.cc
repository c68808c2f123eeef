// The fedagg.v1.Tier service (parent side).
#include "service/rpc/tier_service.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "service/core/chunk_channel.h"
#include "service/core/mutex.h"
#include "service/rpc/grpc_status.h"
#include "service/rpc/push_stream.h"
#include "service/rounds/spec_conversion.h"

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

// How long an intermediate's Join answer waits for its own join at its parent.
constexpr absl::Duration kJoinedWait = absl::Seconds(5);

// Chunks of a pushed partial that may wait for the decoder, beyond the one it decodes.
constexpr uint64_t kQueuedPartialBytes = uint64_t{8} << 20;
// The most chunk bytes a push holds besides its decoded partial: the queue, the chunk
// being decoded and the one a paused read holds (a chunk is at most one gRPC message).
constexpr uint64_t kPartialBytesInFlight = kQueuedPartialBytes + 2 * kMaxReceivedMessageBytes;

// Receives one pushed partial and decodes it while it arrives, on a thread of its own fed
// through a ChunkChannel; merges it once it is complete and decoded, then answers. The
// partial is held once, decoded, plus the chunks in flight: never its whole serialized
// form. A malformed partial is refused as soon as the decoder finds it, without reading
// the rest.
class PushPartialReactor final : public grpc::ServerReadReactor<v1::PartialChunk> {
 public:
  PushPartialReactor(grpc::CallbackServerContext* context, ServiceContext& service,
                     v1::PushPartialResponse* response)
      : service_(service), response_(response) {
    if (absl::Status auth = service.authenticator.Check(*context); !auth.ok()) {
      FinishOnce(ToGrpcStatus(auth));
      return;
    }
    StartRead(&chunk_);
  }

  void OnReadDone(bool ok) override {
    if (finished()) return;  // refused while this read was outstanding
    if (!ok) {
      StreamEnded();
      return;
    }
    if (channel_ == nullptr) {
      if (absl::Status started = Start(); !started.ok()) {
        FinishOnce(ToGrpcStatus(started));
        return;
      }
    }
    if (received_ + chunk_.data().size() > header_.total_bytes()) {
      const absl::Status refused = absl::InvalidArgumentError("partial chunks exceed the declared total_bytes");
      channel_->Close(refused);
      FinishOnce(ToGrpcStatus(refused));
      return;
    }
    received_ += chunk_.data().size();
    for (std::string& client_id : *chunk_.mutable_covered_client_ids()) covered_.push_back(std::move(client_id));
    chunk_.clear_covered_client_ids();
    if (channel_->Put(std::move(*chunk_.mutable_data()))) StartRead(&chunk_);
  }

  void OnDone() override {
    if (decoder_.joinable()) decoder_.join();
    delete this;
  }

 private:
  // The first chunk: checks its header, finds the aggregation, claims memory, and starts
  // the decoder.
  absl::Status Start() {
    header_ = chunk_;
    header_.clear_data();
    header_.clear_covered_client_ids();
    if (header_.total_bytes() > kMaxPartialBytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("partial of ", header_.total_bytes(), " bytes exceeds the limit of ", kMaxPartialBytes));
    }
    if (header_.child_id().empty() || header_.sequence() == 0) {
      return absl::InvalidArgumentError("the first PartialChunk must carry child_id and a sequence >= 1");
    }
    absl::StatusOr<std::shared_ptr<Aggregation>> aggregation =
        FindForChild(service_.registry, header_.aggregation_id(), header_.incarnation());
    if (!aggregation.ok()) return aggregation.status();
    if (header_.wait_durable() && !(*aggregation)->durable_acks()) {
      return absl::FailedPreconditionError(
          "the push asks to wait for a checkpoint, but no checkpoint holds what this aggregator merges "
          "(--checkpoint_dir is not set at the root, or this intermediate is not joined under one); push "
          "without wait_durable");
    }
    // The decoded partial is about as large as its serialized form; with the chunks in
    // flight it counts in the node's memory budget until merged. A push that would exceed
    // the budget is refused before a byte is held (the child keeps its delta and pushes
    // it again).
    if (service_.memory_budget != nullptr) {
      const uint64_t total = header_.total_bytes();
      absl::StatusOr<MemoryReservation> held = service_.memory_budget->Reserve(
          total + std::min(total, kPartialBytesInFlight),
          absl::StrCat("a partial of ", total, " bytes from child '", header_.child_id(),
                       "' (held decoded until merged, plus the chunks being received)"));
      if (!held.ok()) return held.status();
      held_ = *std::move(held);
    }
    aggregation_ = *std::move(aggregation);
    channel_ = std::make_unique<ChunkChannel>(kQueuedPartialBytes, [this] {
      if (!finished()) StartRead(&chunk_);
    });
    decoder_ = std::thread([this] { Decode(); });
    return absl::OkStatus();
  }

  // The decoder's thread: reads the partial from the channel as it arrives; once it is
  // decoded and the child has half-closed, merges it and answers (here, not in a
  // reaction: a merge is long, and may wait for a reduction in progress).
  void Decode() {
    ByteReader in(*channel_, header_.total_bytes());
    decoded_ = aggregation_->DecodeChildPartial(header_.child_id(), in);
    if (!decoded_.ok()) {
      FinishOnce(ToGrpcStatus(decoded_.status()));  // the rest of the stream is not read
      return;
    }
    {
      MutexLock lock(&mu_);
      mu_.Await([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stream_ended_ || finished_; });
      if (finished_) return;
    }
    MergeAndAnswer();
  }

  // The child half-closed (or the stream broke). An incomplete partial fails the decoder.
  void StreamEnded() {
    if (channel_ == nullptr) {
      FinishOnce(ToGrpcStatus(absl::InvalidArgumentError("PushPartial carried no chunk")));
      return;
    }
    channel_->Close(received_ == header_.total_bytes()
                        ? absl::OkStatus()
                        : absl::InvalidArgumentError(absl::StrCat("partial incomplete: ", received_, " of ",
                                                                  header_.total_bytes(), " bytes")));
    MutexLock lock(&mu_);
    stream_ended_ = true;
  }

  // Merges, then answers — at once, or once a checkpoint holds the partial when the child
  // asked to wait for that.
  void MergeAndAnswer() {
    absl::Status merged = Merge();
    decoded_ = absl::CancelledError("merged or refused");  // frees what Merge did not take
    held_ = MemoryReservation();
    if (!merged.ok()) {
      FinishOnce(ToGrpcStatus(merged));
      return;
    }
    if (!header_.wait_durable()) {
      response_->set_durable_sequence(aggregation_->DurableChildSequence(header_.child_id()));
      FinishOnce(grpc::Status::OK);
      return;
    }
    std::weak_ptr<Aggregation> weak = aggregation_;
    aggregation_->WhenDurable([this, weak](bool durable) {
      if (!durable) {
        FinishOnce(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                "the partial was merged but no checkpoint holds it: this aggregator "
                                "stopped, or its backend failed the aggregation (see its status); push it "
                                "again (same sequence) once the aggregator is back"));
        return;
      }
      if (std::shared_ptr<Aggregation> a = weak.lock()) {
        response_->set_durable_sequence(a->DurableChildSequence(header_.child_id()));
      }
      FinishOnce(grpc::Status::OK);
    });
  }

  absl::Status Merge() {
    // The aggregation may have been deleted (and its id created again) while the partial
    // was arriving: merge only into the one it was decoded for, if it is still there.
    absl::StatusOr<std::shared_ptr<Aggregation>> current =
        FindForChild(service_.registry, header_.aggregation_id(), header_.incarnation());
    if (!current.ok()) return current.status();
    if (*current != aggregation_) {
      return absl::NotFoundError(absl::StrCat("aggregation '", header_.aggregation_id(),
                                              "' was deleted while the partial arrived; the aggregation it "
                                              "was pushed for is gone"));
    }
    absl::StatusOr<int64_t> merged = aggregation_->MergeChildPartial(
        header_.child_id(), header_.sequence(), header_.final(), *std::move(decoded_), covered_);
    if (!merged.ok()) return merged.status();
    service_.metrics.partials_merged.Increment();
    response_->set_contributions(*merged);
    return absl::OkStatus();
  }

  bool finished() {
    MutexLock lock(&mu_);
    return finished_;
  }
  // Finishes the call unless it already was (the decoder and the reads may both refuse).
  void FinishOnce(grpc::Status status) {
    {
      MutexLock lock(&mu_);
      if (finished_) return;
      finished_ = true;
    }
    Finish(std::move(status));
  }

  ServiceContext& service_;
  v1::PushPartialResponse* response_;
  v1::PartialChunk chunk_;   // the read in progress
  v1::PartialChunk header_;  // the first chunk, without its data
  uint64_t received_ = 0;
  std::vector<std::string> covered_;  // covered_client_ids of every chunk so far
  std::shared_ptr<Aggregation> aggregation_;
  MemoryReservation held_;  // for the decoded partial and the chunks in flight, until the merge
  std::unique_ptr<ChunkChannel> channel_;  // set by the first chunk
  std::thread decoder_;
  Mutex mu_;
  absl::StatusOr<PartialAggregate> decoded_ = absl::UnknownError("not decoded yet");  // decoder thread only
  bool stream_ended_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

TierService::TierService(ServiceContext& context)
    : context_(context), instance_(absl::StrCat(getpid(), "@", absl::ToUnixNanos(absl::Now()))) {}

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
  const absl::StatusOr<Aggregation::ChildRegistration> joined =
      (*found)->ChildJoined(child_id, [weak_stream](Aggregation::ChildCommand command) {
        if (auto s = weak_stream.lock()) {
          v1::TierCommand message;
          message.set_kind(command == Aggregation::ChildCommand::kSeal ? v1::TierCommand::SEAL
                                                                       : v1::TierCommand::FLUSH);
          s->Push(std::move(message));
        }
      });
  if (!joined.ok()) {
    stream->Close(ToGrpcStatus(joined.status()));
    return stream.get();
  }
  const Aggregation::ChildRegistration& registration = *joined;
  join->store(registration.join);
  // The first command tells the child what this node holds from it, so that after a
  // restart from a checkpoint it pushes the missing deltas again, and what it promises.
  auto command = [instance = instance_, last_sequence = registration.last_sequence,
                  partial_dtype = DTypeToProto(PartialPrecisionDType(context_.child_partial_precision))](
                     v1::TierCommand::Kind kind, const Aggregation& a) {
    v1::TierCommand message;
    message.set_kind(kind);
    message.set_last_sequence(last_sequence);
    message.set_partial_dtype(partial_dtype);
    message.set_parent_checkpoints(a.checkpointed());
    message.set_parent_durable_acks(a.durable_acks());
    message.set_parent_instance(instance);
    return message;
  };
  if (registration.sealed) stream->Push(command(v1::TierCommand::SEAL, **found));
  // After registration: once the child reads JOINED, the parent waits for what it acks.
  // An intermediate sends it once it is joined at its own parent (or gave up waiting), so
  // that what it says about durability holds, and the child's first claims can be answered.
  (*found)->WhenJoined(absl::Now() + kJoinedWait, [weak_stream, weak_aggregation, command] {
    std::shared_ptr<PushStream<v1::TierCommand>> s = weak_stream.lock();
    std::shared_ptr<Aggregation> a = weak_aggregation.lock();
    if (s != nullptr && a != nullptr) s->Push(command(v1::TierCommand::JOINED, *a));
  });
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
