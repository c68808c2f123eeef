// SecureCohorts: forming cohorts, relaying their stages, recording what the root needs.
#include "service/rounds/secure_cohorts.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "service/core/keyed_random.h"

namespace fedagg {
namespace {

absl::Status TooLate(absl::string_view stage) {
  return absl::DeadlineExceededError(absl::StrCat(
      "your cohort's ", stage, " stage ended without your message (its stage timeout passed); this client is "
      "out of this round's secure sum: its update is not counted"));
}

}  // namespace

SecureCohorts::SecureCohorts(CohortFrame frame, SecureCohortOptions options, Key32 root_public_key)
    : frame_(std::move(frame)), options_(options), root_public_key_(root_public_key) {}

std::pair<SecureCohorts::Cohort*, int> SecureCohorts::FindLocked(const std::string& client_id) {
  const auto it = by_client_.find(client_id);
  if (it == by_client_.end()) return {nullptr, -1};
  Cohort* cohort = it->second;
  for (size_t i = 0; i < cohort->clients.size(); ++i) {
    if (cohort->clients[i].id == client_id) return {cohort, static_cast<int>(i)};
  }
  return {nullptr, -1};
}

absl::Status SecureCohorts::Advertise(const std::string& client_id, const v1::AdvertiseKeys& keys,
                                      std::shared_ptr<Member> member, absl::Time now) {
  if (keys.channel_public_key().size() != sizeof(Key32) || keys.mask_public_key().size() != sizeof(Key32)) {
    return absl::InvalidArgumentError("advertise: both public keys are X25519 keys of 32 bytes");
  }
  if (client_id.empty()) return absl::InvalidArgumentError("advertise: a client id is required");
  if (root_public_key_ == Key32{}) {
    return absl::FailedPreconditionError(
        "this aggregation's spec carries no root key (SecureAggregation.root_public_key): the root sets it "
        "when it creates the aggregation");
  }
  Replies replies;
  {
    MutexLock lock(&mu_);
    if (sealed_) {
      return absl::FailedPreconditionError(
          "this secure aggregation is sealed: no cohort forms any more; join the next round");
    }
    if (by_client_.count(client_id) > 0) {
      return absl::AlreadyExistsError(absl::StrCat("client '", client_id,
                                                   "' is in a cohort of this aggregation already; one stream a client"));
    }
    if (cohorts_.empty() || cohorts_.back()->stage != Stage::kForming) {
      cohorts_.push_back(std::make_unique<Cohort>());
      cohorts_.back()->stage_began = now;
    }
    Cohort& forming = *cohorts_.back();
    Client client;
    client.id = client_id;
    client.keys.set_channel_public_key(keys.channel_public_key());
    client.keys.set_mask_public_key(keys.mask_public_key());
    client.member = std::move(member);
    forming.clients.push_back(std::move(client));
    by_client_[client_id] = &forming;
    if (static_cast<int>(forming.clients.size()) >= options_.max_cohort) FormLocked(forming, now, replies);
  }
  Send(std::move(replies));
  return absl::OkStatus();
}

void SecureCohorts::FormLocked(Cohort& cohort, absl::Time now, Replies& replies) {
  const int n = static_cast<int>(cohort.clients.size());
  const absl::StatusOr<CohortGraphParameters> parameters = options_.GraphFor(n);
  if (!parameters.ok()) {  // a threat model no graph of this cohort's size meets
    FailLocked(cohort, absl::FailedPreconditionError(absl::StrCat("a cohort of ", n, " clients could not be formed: ",
                                                                  parameters.status().message())),
               replies);
    return;
  }
  absl::StatusOr<NoiseKey> seed = NoiseKey::Fresh();
  absl::StatusOr<NoiseKey> id = NoiseKey::Fresh();
  absl::StatusOr<NeighbourGraph> graph =
      seed.ok() ? NeighbourGraph::Harary(n, parameters->degree, MaskSeed{seed->bytes}) : seed.status();
  if (!id.ok() || !graph.ok()) {
    FailLocked(cohort, absl::InternalError(absl::StrCat("the cohort could not be formed: ",
                                                        (id.ok() ? graph.status() : id.status()).message())),
               replies);
    return;
  }
  cohort.id = absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(id->bytes.data()), 16));
  cohort.degree = parameters->degree;
  cohort.threshold = parameters->threshold;
  cohort.graph_seed.assign(reinterpret_cast<const char*>(seed->bytes.data()), seed->bytes.size());
  cohort.graph = *std::move(graph);
  cohort.stage = Stage::kSharing;
  cohort.stage_began = now;
  v1::CohortResponse response;
  v1::Roster& roster = *response.mutable_roster();
  roster.set_cohort_id(cohort.id);
  roster.set_degree(static_cast<uint32_t>(cohort.degree));
  roster.set_threshold(static_cast<uint32_t>(cohort.threshold));
  roster.set_graph_seed(cohort.graph_seed);
  roster.set_root_public_key(BytesOf(root_public_key_));
  for (const Client& client : cohort.clients) *roster.add_members() = client.keys;
  for (int i = 0; i < n; ++i) {
    roster.set_index(static_cast<uint32_t>(i));
    replies.push_back(Reply{cohort.clients[i].member, response, std::nullopt});
  }
}

absl::Status SecureCohorts::ShareKeys(const std::string& client_id, const v1::ShareKeys& shares, absl::Time now) {
  Replies replies;
  {
    MutexLock lock(&mu_);
    auto [cohort, index] = FindLocked(client_id);
    if (cohort == nullptr || cohort->stage != Stage::kSharing || cohort->clients[index].shared) {
      return absl::FailedPreconditionError(
          "shares are sent once, after the roster and before the cohort's share stage ends");
    }
    const absl::Span<const int> neighbours = cohort->graph.NeighboursOf(index);
    std::set<uint32_t> seen;
    for (const v1::SealedShare& share : shares.shares()) {
      if (!cohort->graph.AreNeighbours(index, static_cast<int>(std::min<uint32_t>(share.peer(), 1u << 30))) ||
          !seen.insert(share.peer()).second) {
        return absl::InvalidArgumentError(absl::StrCat(
            "a share for member ", share.peer(), " is not for a neighbour of yours, or is repeated"));
      }
      if (share.sealed().size() > kMaxSealedShareBytes) {
        return absl::InvalidArgumentError(absl::StrCat("a sealed share has ", share.sealed().size(),
                                                       " bytes; at most ", kMaxSealedShareBytes));
      }
    }
    if (seen.size() != neighbours.size()) {
      return absl::InvalidArgumentError(absl::StrCat("shares for ", seen.size(), " of your ", neighbours.size(),
                                                     " neighbours: send one to each"));
    }
    Client& client = cohort->clients[index];
    client.shares = shares;
    client.shared = true;
    AdvanceLocked(*cohort, now, replies);
  }
  Send(std::move(replies));
  return absl::OkStatus();
}

absl::Status SecureCohorts::Unmasking(const std::string& client_id, const v1::UnmaskingShares& message,
                                      absl::Time now) {
  Replies replies;
  {
    MutexLock lock(&mu_);
    auto [cohort, index] = FindLocked(client_id);
    if (cohort == nullptr || cohort->stage != Stage::kUnmasking || !cohort->clients[index].masked ||
        cohort->clients[index].answered) {
      return absl::FailedPreconditionError(
          "unmasking shares are sent once, by a client in the sum, after the survivors and before the stage ends");
    }
    const size_t limit = kMaxUnmaskingBytesPerNeighbour * cohort->graph.NeighboursOf(index).size() + 1024;
    if (message.sealed().size() > limit) {
      return absl::InvalidArgumentError(absl::StrCat("the unmasking message has ", message.sealed().size(),
                                                     " bytes; at most ", limit, " for your neighbours"));
    }
    Client& client = cohort->clients[index];
    client.unmasking = message.sealed();
    client.answered = true;
    AdvanceLocked(*cohort, now, replies);
  }
  Send(std::move(replies));
  return absl::OkStatus();
}

void SecureCohorts::Left(const std::string& client_id, absl::Time now) {
  Replies replies;
  {
    MutexLock lock(&mu_);
    auto [cohort, index] = FindLocked(client_id);
    if (cohort == nullptr) return;
    if (cohort->stage == Stage::kForming) {
      cohort->clients.erase(cohort->clients.begin() + index);
      by_client_.erase(client_id);
      return;
    }
    cohort->clients[index].gone = true;
    cohort->clients[index].member = nullptr;
    AdvanceLocked(*cohort, now, replies);
  }
  Send(std::move(replies));
}

absl::Status SecureCohorts::BeginInput(const std::string& client_id) {
  MutexLock lock(&mu_);
  auto [cohort, index] = FindLocked(client_id);
  if (cohort == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "client '", client_id, "' is in no cohort of this secure aggregation at this node: run the key exchange "
        "(Cohorts.JoinCohort) first, on the same channel as the update"));
  }
  Client& client = cohort->clients[index];
  if (cohort->stage != Stage::kMasking || cohort->masking_closing || !client.shared || client.masked ||
      client.in_flight) {
    return absl::FailedPreconditionError(
        "a masked update is taken once, after the cohort's shares were handed out and before its masking stage "
        "ended");
  }
  client.in_flight = true;
  ++cohort->in_flight;
  return absl::OkStatus();
}

void SecureCohorts::EndInput(const std::string& client_id, bool counted, absl::Time now) {
  Replies replies;
  {
    MutexLock lock(&mu_);
    auto [cohort, index] = FindLocked(client_id);
    if (cohort == nullptr || !cohort->clients[index].in_flight) return;
    cohort->clients[index].in_flight = false;
    cohort->clients[index].masked = counted;
    --cohort->in_flight;
    AdvanceLocked(*cohort, now, replies);
  }
  Send(std::move(replies));
}

void SecureCohorts::AdvanceLocked(Cohort& cohort, absl::Time now, Replies& replies) {
  const auto all = [&](auto done) {
    return std::all_of(cohort.clients.begin(), cohort.clients.end(), done);
  };
  switch (cohort.stage) {
    case Stage::kSharing:
      if (all([](const Client& c) { return c.shared || c.gone; })) EndSharingLocked(cohort, now, replies);
      return;
    case Stage::kMasking:
      if (sealed_ || all([](const Client& c) { return c.masked || c.gone || !c.shared; })) {
        EndMaskingLocked(cohort, now, replies);
      }
      return;
    case Stage::kUnmasking:
      if (all([](const Client& c) { return c.answered || c.gone || !c.masked; })) EndUnmaskingLocked(cohort, replies);
      return;
    default:
      return;
  }
}

void SecureCohorts::EndSharingLocked(Cohort& cohort, absl::Time now, Replies& replies) {
  const int shared = static_cast<int>(
      std::count_if(cohort.clients.begin(), cohort.clients.end(), [](const Client& c) { return c.shared; }));
  if (shared < cohort.threshold + 1) {
    // Nothing is counted yet: the cohort ends cleanly, its clients may join another.
    FailLocked(cohort,
               absl::UnavailableError(absl::StrCat(
                   "only ", shared, " of your cohort's ", cohort.clients.size(),
                   " clients sent their shares in time, too few for its threshold of ", cohort.threshold,
                   "; nothing of yours was counted: join again")),
               replies);
    return;
  }
  cohort.stage = Stage::kMasking;
  cohort.stage_began = now;
  for (size_t to = 0; to < cohort.clients.size(); ++to) {
    Client& receiver = cohort.clients[to];
    if (!receiver.shared) {
      if (receiver.member != nullptr) replies.push_back(Reply{receiver.member, std::nullopt, TooLate("share")});
      receiver.member = nullptr;
      continue;
    }
    v1::CohortResponse response;
    v1::SharedKeys& delivered = *response.mutable_shared_keys();
    for (int from : cohort.graph.NeighboursOf(static_cast<int>(to))) {
      const Client& sender = cohort.clients[from];
      if (!sender.shared) continue;
      for (const v1::SealedShare& share : sender.shares.shares()) {
        if (share.peer() != to) continue;
        v1::SealedShare& out = *delivered.add_shares();
        out.set_peer(static_cast<uint32_t>(from));
        out.set_sealed(share.sealed());
      }
    }
    replies.push_back(Reply{receiver.member, std::move(response), std::nullopt});
  }
  for (Client& client : cohort.clients) client.shares.Clear();  // delivered
  AdvanceLocked(cohort, now, replies);  // everyone may have left meanwhile
}

void SecureCohorts::EndMaskingLocked(Cohort& cohort, absl::Time now, Replies& replies) {
  cohort.masking_closing = true;
  if (cohort.in_flight > 0) return;  // EndInput comes back here
  cohort.stage = Stage::kUnmasking;
  cohort.stage_began = now;
  v1::CohortResponse response;
  for (const Client& client : cohort.clients) response.mutable_survivors()->add_masked(client.masked);
  for (Client& client : cohort.clients) {
    if (client.member == nullptr) continue;
    if (client.masked) {
      replies.push_back(Reply{client.member, response, std::nullopt});
    } else if (client.shared) {
      replies.push_back(Reply{client.member, std::nullopt, TooLate("masking")});
      client.member = nullptr;
    }
  }
  AdvanceLocked(cohort, now, replies);
}

void SecureCohorts::EndUnmaskingLocked(Cohort& cohort, Replies& replies) {
  cohort.stage = Stage::kDone;
  v1::CohortRecord record;
  record.set_cohort_id(cohort.id);
  record.set_degree(static_cast<uint32_t>(cohort.degree));
  record.set_threshold(static_cast<uint32_t>(cohort.threshold));
  record.set_graph_seed(cohort.graph_seed);
  bool any_masked = false;
  v1::CohortResponse done;
  done.mutable_done();
  for (size_t i = 0; i < cohort.clients.size(); ++i) {
    Client& client = cohort.clients[i];
    *record.add_members() = client.keys;
    record.add_shared(client.shared);
    record.add_masked(client.masked);
    any_masked = any_masked || client.masked;
    if (client.answered) {
      v1::SealedShare& share = *record.add_unmasking();
      share.set_peer(static_cast<uint32_t>(i));
      share.set_sealed(std::move(client.unmasking));
    }
    if (client.member == nullptr) continue;
    if (client.answered) {
      replies.push_back(Reply{client.member, done, absl::OkStatus()});
    } else {
      replies.push_back(Reply{client.member, std::nullopt, TooLate("unmasking")});
    }
    client.member = nullptr;
  }
  if (any_masked) records_.push_back(record.SerializeAsString());
}

void SecureCohorts::FailLocked(Cohort& cohort, const absl::Status& why, Replies& replies) {
  for (Client& client : cohort.clients) {
    if (client.member != nullptr) replies.push_back(Reply{client.member, std::nullopt, why});
    by_client_.erase(client.id);
  }
  cohort.clients.clear();
  cohort.stage = Stage::kDone;
}

void SecureCohorts::Tick(absl::Time now) {
  Replies replies;
  {
    MutexLock lock(&mu_);
    for (const std::unique_ptr<Cohort>& owned : cohorts_) {
      Cohort& cohort = *owned;
      if (now - cohort.stage_began < options_.stage_timeout) continue;
      switch (cohort.stage) {
        case Stage::kForming:
          if (static_cast<int>(cohort.clients.size()) >= options_.min_cohort) FormLocked(cohort, now, replies);
          break;
        case Stage::kSharing: EndSharingLocked(cohort, now, replies); break;
        case Stage::kMasking: EndMaskingLocked(cohort, now, replies); break;
        case Stage::kUnmasking: EndUnmaskingLocked(cohort, replies); break;
        case Stage::kDone: break;
      }
    }
  }
  Send(std::move(replies));
}

void SecureCohorts::Seal(absl::Time now) {
  Replies replies;
  {
    MutexLock lock(&mu_);
    sealed_ = true;
    for (const std::unique_ptr<Cohort>& owned : cohorts_) {
      Cohort& cohort = *owned;
      switch (cohort.stage) {
        case Stage::kForming:
        case Stage::kSharing:
          FailLocked(cohort,
                     absl::FailedPreconditionError("the aggregation sealed before your cohort reached its masked "
                                                   "updates; nothing of yours was counted"),
                     replies);
          break;
        case Stage::kMasking: EndMaskingLocked(cohort, now, replies); break;
        default: break;
      }
    }
  }
  Send(std::move(replies));
}

bool SecureCohorts::CompleteLocked() const {
  return std::all_of(cohorts_.begin(), cohorts_.end(), [&](const std::unique_ptr<Cohort>& cohort) {
    return cohort->stage == Stage::kDone || (cohort->stage == Stage::kForming && sealed_);
  });
}

bool SecureCohorts::Complete() const {
  MutexLock lock(&mu_);
  return CompleteLocked();
}

bool SecureCohorts::AwaitComplete(absl::Time deadline) const {
  MutexLock lock(&mu_);
  return mu_.AwaitWithDeadline([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return CompleteLocked(); }, deadline);
}

std::vector<std::string> SecureCohorts::TakeRecords() {
  MutexLock lock(&mu_);
  return std::exchange(records_, {});
}

bool SecureCohorts::HasRecords() const {
  MutexLock lock(&mu_);
  return !records_.empty();
}

void SecureCohorts::Send(Replies replies) {
  for (Reply& reply : replies) {
    if (reply.response.has_value()) reply.member->Send(*reply.response);
    if (reply.finish.has_value()) reply.member->Finish(*reply.finish);
  }
}

}  // namespace fedagg
