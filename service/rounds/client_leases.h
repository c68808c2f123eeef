// ClientLeases: the client-id claims a node granted to its child aggregators that no
// merged partial covers yet. A claim is a lease held by the child that took it: it ends
// when a partial of that child carrying the client's update is merged here (covered), when
// the child gives it back, or when the child is lost (then the client may send its update
// again through another aggregator). While a lease is held, the client's update is
// acknowledged somewhere in the tree but not in this node's partial aggregate, so a retry
// is told to wait, never that it was counted (docs/PROTOCOL.md 6.4).
// Not thread-safe: the owning Aggregation guards it with its state lock.
#ifndef FEDAGG_SERVICE_ROUNDS_CLIENT_LEASES_H_
#define FEDAGG_SERVICE_ROUNDS_CLIENT_LEASES_H_

#include <map>
#include <set>
#include <string>
#include <vector>

namespace fedagg {

class ClientLeases {
 public:
  // `child_id` now holds the claim of `client_id` (which no other child holds).
  void Grant(const std::string& child_id, const std::string& client_id);
  // A partial of `child_id` carrying the updates of `client_ids` was merged: the leases it
  // held on them end. Returns the ids whose lease ended (those `child_id` held).
  std::vector<std::string> Cover(const std::string& child_id, const std::vector<std::string>& client_ids);
  // The child gives back one claim; false when it does not hold it.
  bool Release(const std::string& child_id, const std::string& client_id);
  // The child is lost: every lease it holds ends. Returns the released client ids.
  std::vector<std::string> ReleaseAll(const std::string& child_id);

  // The child holding the lease on `client_id`, or null when none does.
  const std::string* HolderOf(const std::string& client_id) const;
  // The client ids `child_id` holds (for checkpoints).
  std::vector<std::string> HeldBy(const std::string& child_id) const;
  bool Holds(const std::string& child_id) const { return by_child_.contains(child_id); }
  size_t size() const { return holder_.size(); }

 private:
  std::map<std::string, std::string> holder_;              // client id -> child id
  std::map<std::string, std::set<std::string>> by_child_;  // child id -> client ids (never empty)
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_ROUNDS_CLIENT_LEASES_H_
