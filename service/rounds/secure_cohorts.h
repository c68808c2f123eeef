// SecureCohorts: a secure aggregation's cohorts at the node its clients reach (a leaf, or
// a root that takes clients itself): the relay's side of the protocol (docs/PROTOCOL.md
// 4b). Clients advertise their keys; once max_cohort of them did, or a stage timeout after
// the first one with at least min_cohort, they form a cohort and each gets the roster.
// Stage 1: each sends its shares, sealed to its neighbours; the node hands each the
// shares meant for it once all sent (or the stage timed out) — those who did not are
// dropped. Stage 2: each sends its masked update as an ordinary update (BeginInput /
// EndInput gate and record it); the stage closes once all did, at its timeout, or when
// the aggregation seals, and never while an input is being counted. Stage 3: the node
// tells those in the sum who is, and collects their unmasking shares (sealed to the
// root) until all answered or the timeout. The cohort is then complete: its record (the
// keys, graph, sets and sealed shares: v1::CohortRecord) goes up with the node's partial.
// The node never opens a sealed message and never sees a secret; it checks only what it
// can see (who sends what to whom, sizes, stages). Thread-safe; the members' Send and
// Finish run outside its lock (and must not call back into it); it calls nothing else, so
// its owner may call it under its own lock.
#ifndef FEDAGG_SERVICE_ROUNDS_SECURE_COHORTS_H_
#define FEDAGG_SERVICE_ROUNDS_SECURE_COHORTS_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "fedagg/v1/secure_aggregation.pb.h"
#include "service/core/mutex.h"
#include "service/rounds/spec_conversion.h"
#include "service/secagg/cohort_messages.h"

namespace fedagg {

class SecureCohorts {
 public:
  // One client's JoinCohort stream, as the node answers it.
  class Member {
   public:
    virtual ~Member() = default;
    virtual void Send(const v1::CohortResponse& response) = 0;
    // Ends the stream: OK once the client's part is done, an error when it may not go on.
    virtual void Finish(const absl::Status& status) = 0;
  };

  SecureCohorts(CohortFrame frame, SecureCohortOptions options, Key32 root_public_key);

  // Stage 0. FAILED_PRECONDITION once the aggregation sealed; ALREADY_EXISTS when the
  // client is in a cohort already; INVALID_ARGUMENT for keys that are not 32 bytes.
  absl::Status Advertise(const std::string& client_id, const v1::AdvertiseKeys& keys, std::shared_ptr<Member> member,
                         absl::Time now);
  // Stage 1: one share for each neighbour, no other. FAILED_PRECONDITION outside the stage
  // (or sent twice), INVALID_ARGUMENT for a share to a non-neighbour, a repeat, a missing
  // neighbour, or a share over the size limit.
  absl::Status ShareKeys(const std::string& client_id, const v1::ShareKeys& shares, absl::Time now);
  // Stage 3, from a client whose masked update is in the sum, once.
  absl::Status Unmasking(const std::string& client_id, const v1::UnmaskingShares& message, absl::Time now);
  // The client's stream ended: it will answer no more.
  void Left(const std::string& client_id, absl::Time now);

  // Stage 2: whether `client_id` may send its masked update now (in a cohort in stage 2,
  // its shares sent, no update of it counted or being counted): FAILED_PRECONDITION
  // saying why not. OK marks it as being counted until EndInput.
  absl::Status BeginInput(const std::string& client_id);
  void EndInput(const std::string& client_id, bool counted, absl::Time now);

  // Forms a waiting cohort and moves stages on at their timeouts.
  void Tick(absl::Time now);
  // No more inputs: a cohort not formed yet is dropped, stage 2 closes.
  void Seal(absl::Time now);
  // Whether no formed cohort is still running (each is complete, or failed before any
  // input was counted).
  bool Complete() const;
  // Waits until Complete (true) or `deadline` (false); the stages move on through Tick.
  bool AwaitComplete(absl::Time deadline) const;
  // The records of the cohorts completed since the last call (serialized v1::CohortRecord;
  // one holding at least one masked input each).
  std::vector<std::string> TakeRecords();
  // Whether records wait to be taken.
  bool HasRecords() const;
  const SecureCohortOptions& options() const { return options_; }

  // The size limits of a sealed message the node relays.
  static constexpr size_t kMaxSealedShareBytes = 1024;
  static constexpr size_t kMaxUnmaskingBytesPerNeighbour = 256;

 private:
  enum class Stage { kForming, kSharing, kMasking, kUnmasking, kDone };
  struct Client {
    std::string id;
    v1::CohortMember keys;
    std::shared_ptr<Member> member;
    bool gone = false;
    bool shared = false;
    bool in_flight = false;
    bool masked = false;
    bool answered = false;
    v1::ShareKeys shares;    // its stage-1 message
    std::string unmasking;   // its stage-3 message
  };
  struct Cohort {
    std::string id;
    Stage stage = Stage::kForming;
    absl::Time stage_began;
    std::vector<Client> clients;
    int degree = 0;
    int threshold = 0;
    std::string graph_seed;
    NeighbourGraph graph;
    int in_flight = 0;
    // Stage 2 was told to end (timeout or seal) while inputs were being counted: it takes
    // no new one, and ends once those are counted or abandoned.
    bool masking_closing = false;
  };
  // What to tell a member once the lock is released.
  struct Reply {
    std::shared_ptr<Member> member;
    std::optional<v1::CohortResponse> response;
    std::optional<absl::Status> finish;
  };
  using Replies = std::vector<Reply>;

  void FormLocked(Cohort& cohort, absl::Time now, Replies& replies) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndSharingLocked(Cohort& cohort, absl::Time now, Replies& replies) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Closes stage 2 unless an input is being counted (then EndInput closes it).
  void EndMaskingLocked(Cohort& cohort, absl::Time now, Replies& replies) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndUnmaskingLocked(Cohort& cohort, Replies& replies) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops every client of a cohort that cannot go on, with `why`; forgets it.
  void FailLocked(Cohort& cohort, const absl::Status& why, Replies& replies) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the cohort on when every client it waits for has answered.
  void AdvanceLocked(Cohort& cohort, absl::Time now, Replies& replies) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void Send(Replies replies);
  bool CompleteLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The client's place: its cohort and index; null when not in one.
  std::pair<Cohort*, int> FindLocked(const std::string& client_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CohortFrame frame_;
  const SecureCohortOptions options_;
  const Key32 root_public_key_;

  mutable Mutex mu_;
  bool sealed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::unique_ptr<Cohort>> cohorts_ ABSL_GUARDED_BY(mu_);  // the forming one, if any, last
  std::map<std::string, Cohort*> by_client_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> records_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_ROUNDS_SECURE_COHORTS_H_
