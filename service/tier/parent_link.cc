// ParentLink: spec discovery, mirror joins and delta forwarding to the parent aggregator.
#include "service/tier/parent_link.h"

#include <algorithm>
#include <cstdio>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "service/rpc/grpc_status.h"
#include "service/rpc/service_context.h"

namespace fedagg {
namespace {
// A push chunk's partial bytes, and the covered client ids sent with it (counting each
// id's field framing), at most: together, with the first chunk's header, under the
// parent's message limit. (A partial of 4 MiB and more used to fail at the parent once
// one push covered more than 64 KiB of client ids: a secure aggregation's one push does.)
constexpr size_t kPushChunkBytes = 3 << 20;
constexpr size_t kPushChunkIdBytes = 1 << 20;
constexpr size_t kPushChunkIdFraming = 8;  // a repeated string's tag and length, at most
static_assert(kPushChunkBytes + kPushChunkIdBytes + (32 << 10) <= kMaxReceivedMessageBytes,
              "a push chunk must fit the parent's message limit");
constexpr absl::Duration kRejoinBackoff = absl::Milliseconds(200);
}  // namespace

ParentLink::ParentLink(ParentLinkOptions options, AggregationRegistry& registry)
    : options_(std::move(options)),
      registry_(registry),
      control_(v1::Control::NewStub(options_.channel)),
      tier_(v1::Tier::NewStub(options_.channel)),
      claims_(*tier_, options_.child_id,
              [this](grpc::ClientContext& context) { PrepareContext(context, /*with_deadline=*/true); }) {
  sync_thread_ = std::thread([this] { SyncLoop(); });
  forward_thread_ = std::thread([this] { ForwardLoop(); });
}

ParentLink::~ParentLink() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    for (auto& [id, link] : links_) {
      MutexLock join_lock(&link->join_mu);
      if (link->join_context != nullptr) link->join_context->TryCancel();
    }
  }
  {
    MutexLock lock(&wakeup_->mu);
    wakeup_->stopping = true;
  }
  sync_thread_.join();
  if (forward_thread_.joinable()) forward_thread_.join();  // no link is removed from here on
  std::vector<MirrorLink*> links;
  {
    MutexLock lock(&mu_);
    for (auto& [id, link] : links_) links.push_back(link.get());
  }
  for (MirrorLink* link : links) link->join_thread.join();  // each takes mu_ as it ends
}

void ParentLink::ForwardBeforeStopping() {
  {
    MutexLock lock(&wakeup_->mu);
    wakeup_->stopping = true;
  }
  if (forward_thread_.joinable()) forward_thread_.join();  // no link is removed from here on
  std::vector<MirrorLink*> links;
  {
    MutexLock lock(&mu_);
    for (auto& [id, link] : links_) links.push_back(link.get());
  }
  // Once the parent proves unreachable the other mirrors are not tried: each would wait
  // out its own timeout.
  absl::Status unreachable;
  for (MirrorLink* link : links) {
    if (link->mirror->state() != v1::OPEN) continue;  // sealed: its join thread delivers the final push
    const absl::Status pushed = unreachable.ok() ? Forward(link, /*final=*/false) : unreachable;
    if (pushed.ok()) continue;
    if (absl::IsUnavailable(pushed) || absl::IsDeadlineExceeded(pushed)) unreachable = pushed;
    std::fprintf(stderr,
                 "fedagg-server: stopping, and could not push aggregation '%s' to the parent aggregator (%s); "
                 "the updates acknowledged here since its last push are lost\n",
                 link->mirror->id().c_str(), pushed.ToString().c_str());
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
  link->mirror->OnDurabilityWanted([wakeup = std::weak_ptr<ForwardWakeup>(wakeup_)] {
    if (std::shared_ptr<ForwardWakeup> w = wakeup.lock()) {
      MutexLock lock(&w->mu);
      w->durability_wanted = true;
    }
  });
  MirrorLink* raw = link.get();
  links_[absl::StrCat(raw->mirror->id(), "@", raw->mirror->config().proto.incarnation())] = std::move(link);
  raw->join_thread = std::thread([this, raw] {
    JoinLoop(raw);
    MutexLock lock(&mu_);
    raw->join_finished = true;
  });
}

void ParentLink::JoinLoop(MirrorLink* link) {
  const std::string id = link->mirror->id();
  // Set at the first SEAL: until then the final delta is retried, rejoining in between
  // (a parent that restarted says again which sequence it holds).
  std::optional<absl::Time> give_up;
  absl::Status final_error = absl::UnavailableError("the parent aggregator was not reachable");
  // FAILED_PRECONDITION twice in a row, with a rejoin in between (which corrects a
  // sequence a restarted parent no longer holds): the parent will not take the partial.
  int refusals = 0;
  // Whether the link was lost after a JOINED, and not regained yet (logged once each way).
  bool lost = false;
  while (true) {
    {
      MutexLock lock(&link->push_mu);
      if (link->done) return;
    }
    if (give_up.has_value() && absl::Now() > *give_up) {
      link->mirror->MarkForwarded(final_error);
      return;
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
    request.set_incarnation(link->mirror->config().proto.incarnation());
    std::unique_ptr<grpc::ClientReader<v1::TierCommand>> reader = tier_->Join(&context, request);
    v1::TierCommand command;
    bool first = true;
    bool joined = false;  // on this stream
    bool sealed = false;
    absl::Status parent_lost_us;  // the parent process changed and kept nothing of ours
    while (reader->Read(&command)) {
      if (first) {
        first = false;
        parent_lost_us = ParentReported(link, command);
        if (!parent_lost_us.ok()) break;
      }
      if (command.kind() == v1::TierCommand::JOINED) {
        link->mirror->SetJoinedUpstream(true);
        joined = true;
        if (lost) std::fprintf(stderr, "fedagg-server: rejoined aggregation '%s' at the parent aggregator\n", id.c_str());
        lost = false;
        continue;
      }
      if (command.kind() == v1::TierCommand::SEAL) {
        sealed = true;
        break;
      }
      if (command.kind() == v1::TierCommand::FLUSH) (void)Forward(link, /*final=*/false);
    }
    bool delivered = false;
    if (sealed) {
      // Stop accepting, then deliver everything with the final push. A node with
      // children of its own (a deeper tree) first waits for their finals.
      (void)link->mirror->Seal();
      if (!give_up.has_value()) {
        (void)link->mirror->AwaitChildren(absl::Now() + options_.child_grace);
        give_up = absl::Now() + options_.child_grace;
        // A secure aggregation's cohorts here finish the stages the seal closed (their
        // records go up with the final push); bounded by their stage timeouts.
        (void)link->mirror->AwaitSecureCohorts();
      }
      final_error = Forward(link, /*final=*/true);
      delivered = final_error.ok();
      refusals = final_error.code() == absl::StatusCode::kFailedPrecondition ? refusals + 1 : 0;
    }
    // After SEAL this side ends the stream; otherwise it ended by itself (the parent went
    // away, refused the join, or stopped answering its keepalive pings).
    if (sealed || !parent_lost_us.ok()) context.TryCancel();
    const absl::Status ended = FromGrpcStatus(reader->Finish());
    link->mirror->SetJoinedUpstream(false, sealed ? absl::OkStatus() : ended);
    if (!sealed && joined && !WaitStopping(absl::ZeroDuration())) {
      lost = true;
      std::fprintf(stderr,
                   "fedagg-server: lost the link to the parent aggregator for aggregation '%s' (%s); "
                   "refusing its updates with UNAVAILABLE and rejoining every %lld ms\n",
                   id.c_str(), ended.ToString().c_str(),
                   static_cast<long long>(absl::ToInt64Milliseconds(kRejoinBackoff)));
    }
    {
      MutexLock lock(&link->join_mu);
      link->join_context = nullptr;
    }
    if (!parent_lost_us.ok()) {
      std::fprintf(stderr, "fedagg-server: failing the mirror of aggregation '%s' here: %s\n", id.c_str(),
                   parent_lost_us.ToString().c_str());
      link->mirror->FailMirror(std::string(parent_lost_us.message()));
      return;
    }
    if (!sealed && ended.code() == absl::StatusCode::kFailedPrecondition) {
      // The parent gave this node up as lost and released the client ids it had claimed
      // without delivering them: their clients send them again elsewhere.
      std::fprintf(stderr, "fedagg-server: the parent aggregator gave this node up for aggregation '%s' (%s); "
                   "failing its mirror here\n", id.c_str(), ended.ToString().c_str());
      link->mirror->FailMirror(absl::StrCat(
          "the parent aggregator gave this aggregator up as lost: ", ended.message(),
          "; updates acknowledged here since the last push are not counted, and their clients may send them "
          "again to another aggregator"));
      return;
    }
    if (!sealed && ended.code() == absl::StatusCode::kNotFound) {
      // The parent does not hold this aggregation (any more): it restarted without
      // checkpoints. Nothing counted here can reach the root; say so to the clients.
      std::fprintf(stderr, "fedagg-server: the parent aggregator no longer holds aggregation '%s' (%s); "
                   "failing its mirror here\n", id.c_str(), ended.ToString().c_str());
      link->mirror->FailMirror(absl::StrCat(
          "the parent aggregator no longer holds this aggregation (it restarted without checkpoints?): ",
          ended.message(), "; updates counted here since the last push are lost, send them to the "
          "parent's current aggregations"));
      return;
    }
    if (delivered || refusals >= 2) {
      link->mirror->MarkForwarded(final_error);
      return;
    }
    const v1::AggregationState state = link->mirror->state();
    if (state != v1::OPEN && state != v1::SEALED) return;
    if (WaitStopping(kRejoinBackoff)) return;
  }
}

absl::Status ParentLink::ParentReported(MirrorLink* link, const v1::TierCommand& command) {
  MutexLock lock(&link->push_mu);
  const bool another_process = !link->parent_instance.empty() && link->parent_instance != command.parent_instance();
  link->parent_instance = command.parent_instance();
  if (another_process && !command.parent_checkpoints() && link->mirror->CountedAnyClient()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the parent aggregator restarted without checkpoints, losing what this aggregator had delivered and "
        "claimed through it for aggregation '", link->mirror->id(), "' (the aggregator above it releases "
        "those claims); updates acknowledged here are not counted, and their clients may send them again"));
  }
  link->parent_checkpoints = command.parent_checkpoints();
  // A parent that names no partial dtype (or one this build does not know) gets full precision.
  const absl::StatusOr<DType> partial_dtype = DTypeFromProto(command.partial_dtype());
  link->partial_precision = partial_dtype.ok() ? PartialPrecisionOf(*partial_dtype) : PartialPrecision::kFull;
  link->parent_durable_acks = command.parent_durable_acks() || command.parent_checkpoints();
  link->mirror->SetUpstreamDurable(link->parent_durable_acks);
  claims_.SetSlowAnswers(link->mirror->id(), link->mirror->config().proto.incarnation(), link->parent_durable_acks);
  const uint64_t holds = command.last_sequence();
  const uint64_t pushed = link->next_sequence - 1;
  const uint64_t first_kept = link->kept.empty() ? link->next_sequence : link->kept.begin()->first;
  if (link->parent_checkpoints && holds < pushed && holds + 1 < first_kept) {
    std::fprintf(stderr,
                 "fedagg-server: the parent holds sequence %llu of aggregation '%s' from this node, "
                 "but it had reported sequences up to %llu durable; its checkpoint lost them\n",
                 static_cast<unsigned long long>(holds), link->mirror->id().c_str(),
                 static_cast<unsigned long long>(first_kept - 1));
  }
  link->parent_holds = holds;
  return absl::OkStatus();
}

absl::Status ParentLink::Forward(MirrorLink* link, bool final) {
  MutexLock lock(&link->push_mu);
  if (link->done) return absl::OkStatus();
  // A secure aggregation goes up once, whole, with its cohorts' records: a delta of masked
  // updates without them could never be unmasked, and if this node is lost before its
  // final push, its cohorts are lost cleanly, nothing of them at the parent.
  if (!final && link->mirror->reduction().options().secure) return absl::OkStatus();
  // What the parent does not hold: a push that failed, or deltas a restarted parent lost.
  if (absl::Status pushed = PushKept(link); !pushed.ok()) return pushed;
  if (!link->final_taken) {
    // A backend failure takes nothing: the mirror's partial stays as it was.
    // Acks waiting for durability need a push even when nothing new was counted: the
    // parent's answer to it says what its checkpoint holds.
    const bool for_durability = link->parent_durable_acks && link->mirror->AwaitsDurability();
    absl::StatusOr<Aggregation::Delta> delta = link->mirror->TakeDelta(final, link->partial_precision);
    if (!delta.ok()) return delta.status();
    if (delta->contributions == 0 && !final && !for_durability) return absl::OkStatus();
    if (link->parent_durable_acks) link->not_yet_durable[link->next_sequence] = std::move(delta->durable_mark);
    // Kept until the parent holds it (and, when it writes checkpoints, until its
    // checkpoint does); a failed push goes out again under the same sequence number.
    MemoryReservation held;
    if (options_.memory_budget != nullptr) held = options_.memory_budget->ReserveUnchecked(delta->bytes.size());
    link->kept[link->next_sequence++] =
        KeptDelta{std::move(delta->bytes), std::move(delta->covered_client_ids), final, std::move(held)};
    link->final_taken = final;
    if (absl::Status pushed = PushKept(link); !pushed.ok()) return pushed;
  }
  if (link->final_taken) link->done = true;
  return absl::OkStatus();
}

absl::Status ParentLink::PushKept(MirrorLink* link) {
  for (auto it = link->kept.upper_bound(link->parent_holds); it != link->kept.end();
       it = link->kept.upper_bound(link->parent_holds)) {
    const uint64_t sequence = it->first;
    const bool newest = std::next(it) == link->kept.end();
    // The final delta is delivered once the parent's checkpoint holds it: after that
    // nothing of this node's is left to send again. The newest one also waits for it while
    // DURABLE acks wait here.
    const bool wait_durable = (it->second.final && link->parent_checkpoints) ||
                              (newest && link->parent_durable_acks && link->mirror->AwaitsDurability());
    absl::StatusOr<v1::PushPartialResponse> response =
        Push(*link->mirror, sequence, it->second.final, wait_durable, it->second);
    if (!response.ok()) return response.status();
    link->parent_holds = sequence;
    const uint64_t releasable = link->parent_checkpoints ? response->durable_sequence() : sequence;
    link->kept.erase(link->kept.begin(), link->kept.upper_bound(releasable));
    DeltasDurable(link, response->durable_sequence());
  }
  return absl::OkStatus();
}

void ParentLink::DeltasDurable(MirrorLink* link, uint64_t durable_sequence) {
  auto end = link->not_yet_durable.upper_bound(durable_sequence);
  if (end == link->not_yet_durable.begin()) return;
  link->mirror->MarkDurable(std::prev(end)->second);  // the newest holds everything before it
  link->not_yet_durable.erase(link->not_yet_durable.begin(), end);
}

absl::StatusOr<v1::PushPartialResponse> ParentLink::Push(const Aggregation& mirror, uint64_t sequence,
                                                         bool final, bool wait_durable,
                                                         const KeptDelta& delta) {
  const std::string& bytes = delta.bytes;
  const std::vector<std::string>& covered = delta.covered_client_ids;
  size_t next_covered = 0;
  grpc::ClientContext context;
  PrepareContext(context, /*with_deadline=*/true);
  // A push that waits for the parent's checkpoint may take a checkpoint interval longer.
  if (wait_durable) context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout + options_.child_grace));
  v1::PushPartialResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::PartialChunk>> writer = tier_->PushPartial(&context, &response);
  size_t offset = 0;
  do {
    v1::PartialChunk chunk;
    if (offset == 0) {
      chunk.set_aggregation_id(mirror.id());
      chunk.set_incarnation(mirror.config().proto.incarnation());
      chunk.set_child_id(options_.child_id);
      chunk.set_sequence(sequence);
      chunk.set_final(final);
      chunk.set_total_bytes(bytes.size());
      chunk.set_wait_durable(wait_durable);
    }
    const size_t n = std::min(kPushChunkBytes, bytes.size() - offset);
    chunk.set_data(bytes.substr(offset, n));
    offset += n;
    for (size_t id_bytes = 0; next_covered < covered.size(); ++next_covered) {
      const size_t framed = covered[next_covered].size() + kPushChunkIdFraming;
      if (id_bytes > 0 && id_bytes + framed > kPushChunkIdBytes) break;  // the next chunk takes it
      id_bytes += framed;
      chunk.add_covered_client_ids(covered[next_covered]);
    }
    if (!writer->Write(chunk)) break;
  } while (offset < bytes.size() || next_covered < covered.size());
  writer->WritesDone();
  absl::Status status = FromGrpcStatus(writer->Finish());
  options_.metrics->partial_forwards.WithLabels({status.ok() ? "ok" : "failed"}).Increment();
  if (!status.ok()) return status;
  return response;
}

void ParentLink::SyncLoop() {
  while (!WaitStopping(options_.sync_interval)) {
    grpc::ClientContext context;
    PrepareContext(context, /*with_deadline=*/true);
    v1::ListAggregationsResponse response;
    // Releases go out even while the parent's answers do not come back: they may arrive.
    claims_.RetryReleases();
    parent_reachable_ = control_->ListAggregations(&context, v1::ListAggregationsRequest(), &response).ok();
    if (!parent_reachable_) continue;
    for (const v1::AggregationStatus& status : response.aggregations()) {
      if (status.state() == v1::OPEN) {
        (void)registry_.GetOrMirror(status.spec());
        continue;
      }
      // Closed at the parent: a mirror still open here stops accepting.
      absl::StatusOr<std::shared_ptr<Aggregation>> mirror = registry_.Find(status.spec().aggregation_id());
      if (mirror.ok() && (*mirror)->state() == v1::OPEN &&
          (*mirror)->config().proto.incarnation() == status.spec().incarnation()) {
        (void)(*mirror)->Seal();
      }
    }
  }
}

bool ParentLink::WaitForwardTurn(absl::Time tick, bool* durability_only) {
  ForwardWakeup& w = *wakeup_;
  MutexLock lock(&w.mu);
  w.mu.AwaitWithDeadline([&w]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return w.stopping || w.durability_wanted; }, tick);
  if (w.stopping) return false;
  *durability_only = absl::Now() < tick;
  w.durability_wanted = false;
  return true;
}

void ParentLink::ForwardLoop() {
  absl::Time tick = absl::Now() + options_.forward_interval;
  bool durability_only = false;
  while (WaitForwardTurn(tick, &durability_only)) {
    if (!durability_only) tick = absl::Now() + options_.forward_interval;
    std::vector<MirrorLink*> links;
    std::vector<std::unique_ptr<MirrorLink>> finished;
    {
      MutexLock lock(&mu_);
      for (auto it = links_.begin(); it != links_.end();) {
        if (it->second->join_finished) {
          finished.push_back(std::move(it->second));
          it = links_.erase(it);
        } else {
          links.push_back(it->second.get());
          ++it;
        }
      }
    }
    // Finished mirrors: their threads have returned (or are returning from the lock
    // above); joining frees them, dropping the link releases the mirror's memory once the
    // registry forgets it too (--retain_finished).
    for (std::unique_ptr<MirrorLink>& link : finished) {
      link->join_thread.join();
      link->mirror->OnDurabilityWanted(nullptr);
      claims_.Forget(link->mirror->id(), link->mirror->config().proto.incarnation());
    }
    finished.clear();
    for (MirrorLink* link : links) {
      if (link->mirror->state() != v1::OPEN) continue;
      if (!durability_only || link->mirror->AwaitsDurability()) (void)Forward(link, /*final=*/false);
    }
  }
}

}  // namespace fedagg
