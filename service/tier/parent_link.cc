// ParentLink: spec discovery, mirror joins and delta forwarding to the parent aggregator.
#include "service/tier/parent_link.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "service/rpc/grpc_status.h"

namespace fedagg {
namespace {
constexpr size_t kPushChunkBytes = 4 << 20;
constexpr absl::Duration kRejoinBackoff = absl::Milliseconds(200);
}  // namespace

ParentLink::ParentLink(ParentLinkOptions options, AggregationRegistry& registry)
    : options_(std::move(options)),
      registry_(registry),
      control_(v1::Control::NewStub(options_.channel)),
      tier_(v1::Tier::NewStub(options_.channel)) {
  sync_thread_ = std::thread([this] { SyncLoop(); });
  forward_thread_ = std::thread([this] { ForwardLoop(); });
}

ParentLink::~ParentLink() {
  std::vector<MirrorLink*> links;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    for (auto& [id, link] : links_) links.push_back(link.get());
  }
  for (MirrorLink* link : links) {
    MutexLock lock(&link->join_mu);
    if (link->join_context != nullptr) link->join_context->TryCancel();
  }
  sync_thread_.join();
  forward_thread_.join();
  for (MirrorLink* link : links) {
    if (link->join_thread.joinable()) link->join_thread.join();
  }
}

bool ParentLink::WaitStopping(absl::Duration timeout) {
  MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_; }, timeout);
}

void ParentLink::PrepareContext(grpc::ClientContext& context, bool with_deadline) const {
  if (!options_.token.empty()) context.AddMetadata("authorization", "Bearer " + options_.token);
  if (with_deadline) context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
}

void ParentLink::FetchSpec(const std::string& id,
                           std::function<void(absl::StatusOr<v1::AggregationSpec>)> done) {
  // Owns the call's state until its completion callback has run.
  struct Call {
    grpc::ClientContext context;
    v1::GetAggregationRequest request;
    v1::AggregationStatus response;
  };
  auto call = std::make_shared<Call>();
  PrepareContext(call->context, /*with_deadline=*/true);
  call->request.set_aggregation_id(id);
  control_->async()->GetAggregation(
      &call->context, &call->request, &call->response,
      [call, id, done = std::move(done)](grpc::Status rpc) {
        if (!rpc.ok()) {
          absl::Status error = FromGrpcStatus(rpc);
          if (error.code() == absl::StatusCode::kNotFound) {
            done(error);
          } else {
            done(absl::UnavailableError(absl::StrCat(
                "cannot learn aggregation '", id, "' from the parent aggregator: ", error.ToString())));
          }
          return;
        }
        if (call->response.state() != v1::OPEN) {
          done(absl::FailedPreconditionError(absl::StrCat(
              "aggregation '", id, "' is ", v1::AggregationState_Name(call->response.state()),
              " at the root and accepts no more updates")));
          return;
        }
        done(call->response.spec());
      });
}

void ParentLink::MirrorCreated(std::shared_ptr<Aggregation> mirror) {
  MutexLock lock(&mu_);
  if (stopping_) return;
  auto link = std::make_unique<MirrorLink>();
  link->mirror = std::move(mirror);
  MirrorLink* raw = link.get();
  links_[raw->mirror->id()] = std::move(link);
  raw->join_thread = std::thread([this, raw] { JoinLoop(raw); });
}

void ParentLink::JoinLoop(MirrorLink* link) {
  const std::string id = link->mirror->id();
  while (true) {
    {
      MutexLock lock(&link->push_mu);
      if (link->done) return;
    }
    grpc::ClientContext context;
    PrepareContext(context, /*with_deadline=*/false);
    {
      MutexLock stop_lock(&mu_);
      if (stopping_) return;
      MutexLock lock(&link->join_mu);
      link->join_context = &context;
    }
    v1::JoinRequest request;
    request.set_aggregation_id(id);
    request.set_child_id(options_.child_id);
    std::unique_ptr<grpc::ClientReader<v1::TierCommand>> reader = tier_->Join(&context, request);
    v1::TierCommand command;
    bool sealed = false;
    while (reader->Read(&command)) {
      if (command.kind() == v1::TierCommand::JOINED) {
        link->mirror->SetJoinedUpstream(true);
        continue;
      }
      if (command.kind() == v1::TierCommand::SEAL) {
        sealed = true;
        break;
      }
      if (command.kind() == v1::TierCommand::FLUSH) (void)Forward(link, /*final=*/false);
    }
    if (sealed) {
      // Stop accepting, then deliver everything with the final push (retrying while the
      // parent is reachable and still waits for us).
      // A node with children of its own (a deeper tree) first waits for their finals.
      (void)link->mirror->Seal();
      (void)link->mirror->AwaitChildren(absl::Now() + options_.child_grace);
      absl::Status forwarded;
      for (int attempt = 0; attempt < 20; ++attempt) {
        forwarded = Forward(link, /*final=*/true);
        if (forwarded.ok() || forwarded.code() == absl::StatusCode::kFailedPrecondition) break;
        if (WaitStopping(kRejoinBackoff)) break;
      }
      link->mirror->MarkForwarded(forwarded);
    }
    link->mirror->SetJoinedUpstream(false);
    context.TryCancel();
    (void)reader->Finish();
    {
      MutexLock lock(&link->join_mu);
      link->join_context = nullptr;
    }
    if (sealed) return;
    const v1::AggregationState state = link->mirror->state();
    if (state != v1::OPEN && state != v1::SEALED) return;
    if (WaitStopping(kRejoinBackoff)) return;
  }
}

absl::Status ParentLink::Forward(MirrorLink* link, bool final) {
  MutexLock lock(&link->push_mu);
  if (link->done) return absl::OkStatus();
  const std::string& id = link->mirror->id();
  if (link->unsent.has_value()) {
    if (absl::Status s = Push(id, link->next_sequence, false, *link->unsent); !s.ok()) return s;
    link->unsent.reset();
    ++link->next_sequence;
  }
  absl::StatusOr<Aggregation::Delta> delta = link->mirror->TakeDelta(final);
  if (!delta.ok()) return delta.status();
  if (delta->contributions == 0 && !final) return absl::OkStatus();
  absl::Status pushed = Push(id, link->next_sequence, final, delta->bytes);
  if (!pushed.ok()) {
    // Keep it; the next Forward sends it first, under the same sequence number. A final
    // delta that could not be delivered goes out the same way on the final retry.
    link->unsent = std::move(delta->bytes);
    return pushed;
  }
  ++link->next_sequence;
  if (final) link->done = true;
  return absl::OkStatus();
}

absl::Status ParentLink::Push(const std::string& aggregation_id, uint64_t sequence, bool final,
                              const std::string& bytes) {
  grpc::ClientContext context;
  PrepareContext(context, /*with_deadline=*/true);
  v1::PushPartialResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::PartialChunk>> writer = tier_->PushPartial(&context, &response);
  size_t offset = 0;
  do {
    v1::PartialChunk chunk;
    if (offset == 0) {
      chunk.set_aggregation_id(aggregation_id);
      chunk.set_child_id(options_.child_id);
      chunk.set_sequence(sequence);
      chunk.set_final(final);
      chunk.set_total_bytes(bytes.size());
    }
    const size_t n = std::min(kPushChunkBytes, bytes.size() - offset);
    chunk.set_data(bytes.substr(offset, n));
    offset += n;
    if (!writer->Write(chunk)) break;
  } while (offset < bytes.size());
  writer->WritesDone();
  absl::Status status = FromGrpcStatus(writer->Finish());
  options_.metrics->partial_forwards.WithLabels({status.ok() ? "ok" : "failed"}).Increment();
  return status;
}

void ParentLink::SyncLoop() {
  while (!WaitStopping(options_.sync_interval)) {
    grpc::ClientContext context;
    PrepareContext(context, /*with_deadline=*/true);
    v1::ListAggregationsResponse response;
    parent_reachable_ = control_->ListAggregations(&context, v1::ListAggregationsRequest(), &response).ok();
    if (!parent_reachable_) continue;
    for (const v1::AggregationStatus& status : response.aggregations()) {
      if (status.state() == v1::OPEN) {
        (void)registry_.GetOrMirror(status.spec());
        continue;
      }
      // Closed at the parent: a mirror still open here stops accepting.
      absl::StatusOr<std::shared_ptr<Aggregation>> mirror = registry_.Find(status.spec().aggregation_id());
      if (mirror.ok() && (*mirror)->state() == v1::OPEN) (void)(*mirror)->Seal();
    }
  }
}

void ParentLink::ForwardLoop() {
  while (!WaitStopping(options_.forward_interval)) {
    std::vector<MirrorLink*> links;
    {
      MutexLock lock(&mu_);
      for (auto& [id, link] : links_) links.push_back(link.get());
    }
    for (MirrorLink* link : links) {
      if (link->mirror->state() == v1::OPEN) (void)Forward(link, /*final=*/false);
    }
  }
}

}  // namespace fedagg
