// AggregationRegistry: creation, lookup (with upstream mirroring) and the deadline ticker.
#include "service/rounds/aggregation_registry.h"

#include <algorithm>
#include <new>
#include <set>
#include <utility>

#include "absl/random/distributions.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "service/core/machine_resources.h"
#include "service/core/memory_budget.h"
#include "service/core/status_macros.h"

namespace fedagg {
namespace {
constexpr absl::Duration kTickInterval = absl::Milliseconds(20);
// How long a client update waits for its intermediate to join a mirror it just learnt.
constexpr absl::Duration kJoinWait = absl::Seconds(1);

absl::Status AlreadyExists(const std::string& id) {
  return absl::AlreadyExistsError(absl::StrCat("aggregation '", id, "' already exists"));
}

// The host memory a new aggregation's accumulators take: all of it with a backend that
// reduces in host memory; with one that reduces on devices (one with a device monitor),
// whose device allocations report their own failures on first use, the exact sums of a
// deterministic aggregation's fields, which every backend keeps in host memory.
uint64_t HostStateBytes(const AggregationConfig& config, const AggregationOptions& options) {
  const bool host_state = options.backend == nullptr || options.backend->device_monitor() == nullptr;
  uint64_t bytes = 0;
  for (const FieldSpec& field : config.reduction->fields()) {
    if (host_state || field.exact_sum) bytes += FixedStateBytes(field);
  }
  return bytes;
}
}  // namespace

AggregationRegistry::AggregationRegistry(AggregationOptions options)
    : options_(options), ticker_([this] { TickerLoop(); }) {}

AggregationRegistry::~AggregationRegistry() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    mu_.Await([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return pending_creations_ == 0; });
  }
  ticker_.join();
}

void AggregationRegistry::RunOnWorkers(std::function<void()> work) {
  if (options_.finalizer == nullptr) {
    work();
    return;
  }
  {
    MutexLock lock(&mu_);
    ++pending_creations_;
  }
  options_.finalizer->Run([this, work = std::move(work)] {
    work();
    MutexLock lock(&mu_);
    --pending_creations_;
  });
}

void AggregationRegistry::CreateAsync(v1::AggregationSpec spec, Created done) {
  RunOnWorkers([this, spec = std::move(spec), done = std::move(done)] { done(Create(spec)); });
}

absl::StatusOr<std::shared_ptr<Aggregation>> AggregationRegistry::Create(
    const v1::AggregationSpec& spec) {
  if (is_intermediate()) {
    return absl::FailedPreconditionError(
        "this is an intermediate aggregator: create aggregations at the root, which is the "
        "server placement; this node learns them from its parent");
  }
  // The incarnation tells this aggregation from any earlier one of the same id.
  v1::AggregationSpec accepted = spec;
  accepted.set_incarnation(absl::StrCat(absl::ToUnixNanos(absl::Now())));
  // A rotated field's signs, the same for every client: drawn here unless the creator chose.
  absl::BitGen random;
  AssignRotationSeeds(accepted, [&] { return absl::Uniform<uint64_t>(random); });
  // A secure aggregation's clients seal their last stage to a key pair only this root holds.
  std::shared_ptr<const SecAggUnmasker> unmasker;
  if (accepted.has_secure()) {
    absl::StatusOr<SecAggUnmasker> created = SecAggUnmasker::Create();
    if (!created.ok()) return created.status();
    unmasker = std::make_shared<const SecAggUnmasker>(*std::move(created));
    accepted.mutable_secure()->set_root_public_key(BytesOf(unmasker->public_key()));
  }
  FEDAGG_ASSIGN_OR_RETURN(AggregationConfig config, ConfigFromProto(accepted));
  config.secure_unmasker = std::move(unmasker);
  if (MutexLock lock(&mu_); by_id_.contains(config.id) || creating_.contains(config.id)) {
    // Answered before the accumulators are made (and checked again below, after).
    return AlreadyExists(config.id);
  }
  FEDAGG_ASSIGN_OR_RETURN(std::shared_ptr<Aggregation> aggregation, MakeAggregationMakingRoom(config, options_));
  const std::string& id = aggregation->id();
  {
    MutexLock lock(&mu_);
    if (by_id_.contains(id) || creating_.contains(id)) {
      return AlreadyExists(id);
    }
    if (store_ == nullptr) {
      by_id_[id] = aggregation;
      creation_order_.push_back(id);
      return aggregation;
    }
    creating_.insert(id);  // reserved while its first checkpoint is written
  }
  // Without the lock (a file write): lookups go on; nobody sees the aggregation before
  // its creation can no longer fail.
  absl::Status stored = store_->Created(*aggregation);
  MutexLock lock(&mu_);
  creating_.erase(id);
  if (!stored.ok()) return stored;
  by_id_[id] = aggregation;
  creation_order_.push_back(id);
  return aggregation;
}

absl::StatusOr<std::shared_ptr<Aggregation>> AggregationRegistry::MakeAggregation(
    AggregationConfig config, const AggregationOptions& options) {
  const uint64_t bytes = HostStateBytes(config, options);
  const std::string accumulators = absl::StrCat("the accumulators of aggregation '", config.id, "' (",
                                                config.reduction->value_type().ToString(), ")");
  // Also without a budget's limit (--memory_budget_bytes=0), its accounts say what the node
  // holds already: a creation that would take the node past its memory is refused here
  // rather than ending the process when the pages are touched.
  const uint64_t memory = ReadMachineResources().memory_bytes;
  const uint64_t held = options.batching.memory_budget != nullptr ? options.batching.memory_budget->used() : 0;
  if (memory != 0 && bytes > 0 && (bytes > memory || held > memory - bytes)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        accumulators, " take ", bytes, " bytes, and this node's memory (", memory, " bytes) already holds ", held,
        " bytes of updates, partials and the accumulators of open aggregations: cancel open aggregations, split the "
        "model over several aggregations, or run them on nodes with more memory"));
  }
  // Held until the aggregation accounts its accumulators itself, so that two creations
  // cannot both take the same free bytes.
  MemoryReservation admitted;
  if (options.batching.memory_budget != nullptr && bytes > 0) {
    FEDAGG_ASSIGN_OR_RETURN(admitted, options.batching.memory_budget->Reserve(bytes, accumulators));
  }
  try {
    return std::make_shared<Aggregation>(std::move(config), options);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(
        accumulators, " (", bytes, " bytes) could not be allocated on this node: finish or cancel other "
        "aggregations, or run it on nodes with more memory"));
  }
}

absl::StatusOr<std::shared_ptr<Aggregation>> AggregationRegistry::MakeAggregationMakingRoom(
    const AggregationConfig& config, const AggregationOptions& options) {
  // Finished aggregations give way only to one that fits the node once they are gone.
  const uint64_t bytes = HostStateBytes(config, options);
  const uint64_t memory = ReadMachineResources().memory_bytes;
  const uint64_t limit = options.batching.memory_budget != nullptr ? options.batching.memory_budget->limit() : 0;
  const bool room_can_help = (memory == 0 || bytes <= memory) && (limit == 0 || bytes <= limit);
  for (;;) {
    absl::StatusOr<std::shared_ptr<Aggregation>> made = MakeAggregation(config, options);
    if (made.ok() || made.status().code() != absl::StatusCode::kResourceExhausted || !room_can_help) return made;
    // The oldest finished aggregation that still holds accumulators gives way to the new
    // one (they are freed, with its result, once no result stream holds it any more);
    // those that freed theirs already keep their results, as forgetting them frees nothing
    // the check counts.
    if (!ForgetOldestFinishedHoldingAccumulators()) return made;
  }
}

absl::Status AggregationRegistry::Adopt(std::shared_ptr<Aggregation> aggregation) {
  MutexLock lock(&mu_);
  if (by_id_.contains(aggregation->id()) || creating_.contains(aggregation->id())) {
    return AlreadyExists(aggregation->id());
  }
  creation_order_.push_back(aggregation->id());
  by_id_[aggregation->id()] = std::move(aggregation);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Aggregation>> AggregationRegistry::GetOrMirror(
    const v1::AggregationSpec& spec) {
  FEDAGG_ASSIGN_OR_RETURN(AggregationConfig config, ConfigFromProto(spec));
  const std::string id = config.id;
  // This incarnation's mirror when the registry has it.
  auto known = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> std::shared_ptr<Aggregation> {
    auto it = by_id_.find(id);
    const bool same = it != by_id_.end() && it->second->config().proto.incarnation() == spec.incarnation();
    return same ? it->second : nullptr;
  };
  if (MutexLock lock(&mu_); std::shared_ptr<Aggregation> mirror = known()) return mirror;
  AggregationOptions options = options_;
  options.forwarding = true;
  options.checkpointed = false;  // a mirror's updates are kept by its parent
  options.claims = upstream_;
  // Made without the registry's lock: lookups must not wait while its accumulators are
  // allocated and zeroed.
  FEDAGG_ASSIGN_OR_RETURN(std::shared_ptr<Aggregation> mirror, MakeAggregationMakingRoom(config, options));
  std::shared_ptr<Aggregation> replaced;
  {
    MutexLock lock(&mu_);
    if (std::shared_ptr<Aggregation> made_meanwhile = known()) return made_meanwhile;  // ours is dropped
    if (auto it = by_id_.find(id); it != by_id_.end()) {
      replaced = it->second;
      std::erase(creation_order_, id);
    }
    by_id_[id] = mirror;
    creation_order_.push_back(id);
  }
  if (replaced != nullptr) {
    replaced->FailMirror(absl::StrCat(
        "the parent aggregator now holds another aggregation '", replaced->id(), "' (incarnation ",
        spec.incarnation(), ", this mirror's was ", replaced->config().proto.incarnation(),
        "): it restarted without checkpoints and the id was created again; what this node counted "
        "for the old one is lost, send those updates to the new one"));
  }
  upstream_->MirrorCreated(mirror);
  return mirror;
}

absl::StatusOr<std::shared_ptr<Aggregation>> AggregationRegistry::Find(const std::string& id) const {
  MutexLock lock(&mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) {
    return absl::NotFoundError(absl::StrCat(
        "no aggregation '", id, "' on this server (never created here, or finished and forgotten: "
        "--retain_finished and --retain_finished_mib say how many results it keeps)"));
  }
  return it->second;
}

void AggregationRegistry::GetAsync(const std::string& id, Lookup done) {
  absl::StatusOr<std::shared_ptr<Aggregation>> found = Find(id);
  if (!is_intermediate()) {
    done(std::move(found));
    return;
  }
  if (found.ok()) {
    AnswerOnceJoined(*std::move(found), std::move(done));
    return;
  }
  upstream_->FetchSpec(id, [this, done = std::move(done)](absl::StatusOr<v1::AggregationSpec> spec) mutable {
    if (!spec.ok()) {
      done(spec.status());
      return;
    }
    // Making the mirror allocates and zeroes its accumulators: on the node's workers, not
    // on the thread that completed the fetch.
    RunOnWorkers([this, spec = *std::move(spec), done = std::move(done)]() mutable {
      absl::StatusOr<std::shared_ptr<Aggregation>> mirror = GetOrMirror(spec);
      if (!mirror.ok()) {
        done(mirror.status());
        return;
      }
      AnswerOnceJoined(*std::move(mirror), std::move(done));
    });
  });
}

void AggregationRegistry::AnswerOnceJoined(std::shared_ptr<Aggregation> mirror, Lookup done) {
  Aggregation* waiting = mirror.get();
  waiting->WhenJoined(absl::Now() + kJoinWait,
                      [mirror = std::move(mirror), done = std::move(done)]() mutable { done(std::move(mirror)); });
}

std::vector<std::shared_ptr<Aggregation>> AggregationRegistry::List() const {
  MutexLock lock(&mu_);
  std::vector<std::shared_ptr<Aggregation>> out;
  for (const std::string& id : creation_order_) out.push_back(by_id_.at(id));
  return out;
}

std::vector<std::shared_ptr<Aggregation>> AggregationRegistry::OpenAggregations(
    int max, const std::string& client_id) {
  // On an intermediate aggregator these are the mirrors of the parent's open
  // aggregations, kept current by the parent link.
  std::vector<std::shared_ptr<Aggregation>> out;
  for (std::shared_ptr<Aggregation>& aggregation : List()) {
    if (static_cast<int>(out.size()) >= max) break;
    if (aggregation->state() == v1::OPEN && !aggregation->HasCounted(client_id)) {
      out.push_back(std::move(aggregation));
    }
  }
  return out;
}

void AggregationRegistry::TickerLoop() {
  while (true) {
    {
      MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_; }, kTickInterval)) return;
    }
    const absl::Time now = absl::Now();
    for (const std::shared_ptr<Aggregation>& aggregation : List()) aggregation->Tick(now);
    ForgetFinished(now);
  }
}

std::vector<std::pair<Aggregation::Finish, std::string>> AggregationRegistry::FinishedLocked() const {
  std::vector<std::pair<Aggregation::Finish, std::string>> finished;
  for (const std::string& id : creation_order_) {
    const Aggregation& aggregation = *by_id_.at(id);
    if (IsFinished(aggregation.state())) {
      finished.emplace_back(aggregation.finish(), id);
    }
  }
  // A long round created before many short ones is as new as its result.
  std::stable_sort(finished.begin(), finished.end(),
                   [](const auto& a, const auto& b) { return a.first.at < b.first.at; });
  return finished;
}

bool AggregationRegistry::ForgetFinished(absl::Time now) {
  std::vector<std::shared_ptr<Aggregation>> forgotten;  // destroyed after the lock is released
  {
    MutexLock lock(&mu_);
    const std::vector<std::pair<Aggregation::Finish, std::string>> finished = FinishedLocked();
    // Only those past their grace may go (and once one is within it, so are all after it).
    size_t past_grace = 0;
    while (past_grace < finished.size() && now - finished[past_grace].first.at >= options_.finished_grace) {
      ++past_grace;
    }
    const size_t retain = static_cast<size_t>(std::max(options_.retain_finished, 0));
    const size_t beyond_count = std::min(past_grace, finished.size() - std::min(finished.size(), retain));
    std::set<std::string> forget;
    for (size_t i = 0; i < beyond_count; ++i) forget.insert(finished[i].second);
    if (options_.retain_finished_bytes > 0) {
      // Then the oldest results of those kept, all but the newest result.
      uint64_t kept_bytes = 0;
      size_t newest_result = finished.size();
      for (size_t i = beyond_count; i < finished.size(); ++i) {
        kept_bytes += finished[i].first.result_bytes;
        if (finished[i].first.result_bytes > 0) newest_result = i;
      }
      const size_t may_go = std::min(past_grace, newest_result);
      for (size_t i = beyond_count; kept_bytes > options_.retain_finished_bytes && i < may_go; ++i) {
        if (finished[i].first.result_bytes == 0) continue;  // going would free nothing of the bound
        forget.insert(finished[i].second);
        kept_bytes -= finished[i].first.result_bytes;
      }
    }
    if (forget.empty()) return false;
    ForgetLocked(forget, &forgotten);
  }
  return true;
}

bool AggregationRegistry::ForgetOldestFinishedHoldingAccumulators() {
  std::vector<std::shared_ptr<Aggregation>> forgotten;  // destroyed after the lock is released
  MutexLock lock(&mu_);
  for (const auto& [finish, id] : FinishedLocked()) {
    if (!by_id_.at(id)->holds_accumulators()) continue;
    ForgetLocked({id}, &forgotten);
    return true;
  }
  return false;
}

void AggregationRegistry::ForgetLocked(const std::set<std::string>& ids,
                                       std::vector<std::shared_ptr<Aggregation>>* forgotten) {
  for (const std::string& id : ids) {
    forgotten->push_back(std::move(by_id_.at(id)));
    by_id_.erase(id);
    if (store_ != nullptr) store_->Forgotten(id);
  }
  std::erase_if(creation_order_, [&ids](const std::string& id) { return ids.contains(id); });
}

}  // namespace fedagg
