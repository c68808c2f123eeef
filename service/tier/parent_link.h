// ParentLink: what makes a fedagg process an intermediate aggregator. It
//  - learns specs from the parent (on first use of an id, and by polling the parent's
//    open aggregations so clients find them in Welcome and GetTask);
//  - keeps a local mirror per aggregation, joins it at the parent (Tier.Join), and
//    forwards the mirror's partial aggregate up as deltas (Tier.PushPartial) every
//    forward interval and, finally, when the parent says SEAL;
//  - claims each client id at the parent before its update is counted here (batched,
//    ClaimBatcher), so a client is counted once in the whole tree;
//  - gives up a mirror whose aggregation the parent no longer holds (a parent restarted
//    without checkpoints), that the parent gave up as lost (its claims there released), or
//    whose parent came back as another process without checkpoints: the mirror ends FAILED
//    saying so, and refuses updates;
//  - names in each push the clients whose updates it carries, so the parent stops holding
//    their claims against this node (docs/PROTOCOL.md 6.4);
//  - never loses a delta: a failed push is retried with the same sequence number, and
//    the parent merges each (child, sequence) once. When the parent writes checkpoints,
//    every delta is kept until the parent reports it durable; a parent that restarted
//    from a checkpoint says on re-join which sequence it holds, and the deltas after it
//    are pushed again. The final delta waits for the parent's checkpoint;
//  - gives DURABLE acks when a checkpoint above holds what the parent merges
//    (TierCommand.parent_durable_acks): while acks wait, each push asks the parent to
//    answer once a checkpoint holds it, and the deltas the parent reports durable are
//    marked so on the mirror (Aggregation::MarkDurable), which releases those acks.
#ifndef FEDAGG_SERVICE_TIER_PARENT_LINK_H_
#define FEDAGG_SERVICE_TIER_PARENT_LINK_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "service/core/memory_budget.h"
#include "service/core/narrowed_partial.h"
#include "service/core/mutex.h"
#include "absl/time/time.h"
#include "fedagg/v1/control.grpc.pb.h"
#include "fedagg/v1/tier.grpc.pb.h"
#include "monitoring/service_metrics.h"
#include "service/rounds/aggregation_registry.h"
#include "service/tier/claim_batcher.h"

namespace fedagg {

struct ParentLinkOptions {
  ServiceMetrics* metrics = nullptr;  // required
  // Holds the kept deltas (acknowledged updates, not yet safe at the parent) in the
  // node's budget; null: not counted.
  MemoryBudget* memory_budget = nullptr;
  std::shared_ptr<grpc::Channel> channel;
  std::string token;     // bearer token for the parent, if it asks for one
  std::string child_id;  // this node's name at the parent
  absl::Duration forward_interval = absl::Seconds(1);
  absl::Duration sync_interval = absl::Milliseconds(200);
  absl::Duration rpc_timeout = absl::Seconds(5);
  // After SEAL, how long to wait for this node's own children before the final push.
  absl::Duration child_grace = absl::Seconds(10);
};

class ParentLink final : public UpstreamSource {
 public:
  ParentLink(ParentLinkOptions options, AggregationRegistry& registry);
  ~ParentLink() override;  // stops every thread, cancelling calls in progress

  void FetchSpec(const std::string& id,
                 std::function<void(absl::StatusOr<v1::AggregationSpec>)> done) override;
  void MirrorCreated(std::shared_ptr<Aggregation> mirror) override;
  void Claim(const std::string& aggregation_id, const std::string& incarnation, const std::string& client_id,
             std::function<void(absl::Status)> done) override {
    claims_.Claim(aggregation_id, incarnation, client_id, std::move(done));
  }
  void Release(const std::string& aggregation_id, const std::string& incarnation,
               const std::string& client_id) override {
    claims_.Release(aggregation_id, incarnation, client_id);
  }
  // Whether the last poll of the parent succeeded (readiness of an intermediate aggregator).
  bool parent_reachable() const { return parent_reachable_; }
  // For a node about to stop that no longer takes updates: ends the periodic forwarding
  // and pushes, once, what each open mirror counted since its last push (and any push
  // that failed), so what this node acknowledged reaches the parent. Each push is bounded
  // by the RPC timeout; one that fails is logged, its updates lost with the process.
  void ForwardBeforeStopping();

 private:
  // A delta taken from the mirror, kept until the parent no longer needs it again; its
  // bytes count in the node's memory budget meanwhile (committed: never refused).
  struct KeptDelta {
    std::string bytes;
    std::vector<std::string> covered_client_ids;  // Aggregation::Delta's
    bool final = false;
    MemoryReservation held;
  };
  struct MirrorLink {
    std::shared_ptr<Aggregation> mirror;
    Mutex push_mu;
    uint64_t next_sequence ABSL_GUARDED_BY(push_mu) = 1;
    // The last sequence the parent holds (acked to us, or reported on (re-)join).
    uint64_t parent_holds ABSL_GUARDED_BY(push_mu) = 0;
    bool parent_checkpoints ABSL_GUARDED_BY(push_mu) = false;
    bool parent_durable_acks ABSL_GUARDED_BY(push_mu) = false;
    // What the parent asks the partials in (its JOINED's partial_dtype).
    PartialPrecision partial_precision ABSL_GUARDED_BY(push_mu) = PartialPrecision::kFull;
    // Under a parent with durable acks: what each pushed delta holds, by sequence, until
    // the parent reports it durable.
    std::map<uint64_t, Aggregation::Delta::DurableMark> not_yet_durable ABSL_GUARDED_BY(push_mu);
    std::string parent_instance ABSL_GUARDED_BY(push_mu);  // the parent's process, once joined
    // Deltas by sequence: those the parent does not hold yet, and, when it writes
    // checkpoints, those its last checkpoint does not hold yet.
    std::map<uint64_t, KeptDelta> kept ABSL_GUARDED_BY(push_mu);
    bool final_taken ABSL_GUARDED_BY(push_mu) = false;
    bool done ABSL_GUARDED_BY(push_mu) = false;  // final partial delivered
    Mutex join_mu;
    grpc::ClientContext* join_context ABSL_GUARDED_BY(join_mu) = nullptr;
    std::thread join_thread;
    // Set (under ParentLink::mu_) when join_thread has nothing left to do: the forward
    // loop then joins the thread and drops the link, and with it the mirror.
    bool join_finished = false;
  };

  void PrepareContext(grpc::ClientContext& context, bool with_deadline) const;
  // Holds a Join stream open (rejoining after failures) until the mirror is done.
  void JoinLoop(MirrorLink* link);
  // Pushes the kept deltas the parent does not hold, then a new one (the final one
  // when `final`).
  absl::Status Forward(MirrorLink* link, bool final);
  // Pushes every kept delta after parent_holds, in order.
  absl::Status PushKept(MirrorLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->push_mu);
  // The parent's checkpoint holds this node's deltas up to `durable_sequence`.
  void DeltasDurable(MirrorLink* link, uint64_t durable_sequence) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->push_mu);
  // What the parent said on (re-)join: the last sequence it holds from us. FAILED_PRECONDITION
  // when the parent is another process that writes no checkpoints, and this mirror counted
  // clients through the previous one: those claims are being released above, so nothing
  // counted here may go up any more.
  absl::Status ParentReported(MirrorLink* link, const v1::TierCommand& command);
  absl::StatusOr<v1::PushPartialResponse> Push(const Aggregation& mirror, uint64_t sequence, bool final,
                                               bool wait_durable, const KeptDelta& delta);
  void SyncLoop();
  void ForwardLoop();
  // Waits until the next forward interval at `tick`, or until a mirror wants durability
  // (`*durability_only` then: push only the mirrors whose acks wait). False when stopping.
  bool WaitForwardTurn(absl::Time tick, bool* durability_only);
  bool WaitStopping(absl::Duration timeout);

  const ParentLinkOptions options_;
  AggregationRegistry& registry_;
  std::unique_ptr<v1::Control::Stub> control_;
  std::unique_ptr<v1::Tier::Stub> tier_;
  ClaimBatcher claims_;

  Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Wakes the forward loop before its interval when a mirror's acks wait for a checkpoint;
  // shared with the mirrors' callbacks, which may run after this link is gone.
  struct ForwardWakeup {
    Mutex mu;
    bool durability_wanted ABSL_GUARDED_BY(mu) = false;
    bool stopping ABSL_GUARDED_BY(mu) = false;
  };
  const std::shared_ptr<ForwardWakeup> wakeup_ = std::make_shared<ForwardWakeup>();
  // One per mirror (by id and incarnation) until its join thread finishes; only the
  // forward loop removes links.
  std::map<std::string, std::unique_ptr<MirrorLink>> links_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> parent_reachable_{false};
  std::thread sync_thread_;
  std::thread forward_thread_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_TIER_PARENT_LINK_H_
