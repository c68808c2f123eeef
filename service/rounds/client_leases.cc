// ClientLeases: client-id claims held by child aggregators until a merged partial covers them.
#include "service/rounds/client_leases.h"

namespace fedagg {

void ClientLeases::Grant(const std::string& child_id, const std::string& client_id) {
  holder_[client_id] = child_id;
  by_child_[child_id].insert(client_id);
}

std::vector<std::string> ClientLeases::Cover(const std::string& child_id,
                                             const std::vector<std::string>& client_ids) {
  std::vector<std::string> covered;
  for (const std::string& client_id : client_ids) {
    if (Release(child_id, client_id)) covered.push_back(client_id);
  }
  return covered;
}

bool ClientLeases::Release(const std::string& child_id, const std::string& client_id) {
  auto held = holder_.find(client_id);
  if (held == holder_.end() || held->second != child_id) return false;
  holder_.erase(held);
  auto child = by_child_.find(child_id);
  child->second.erase(client_id);
  if (child->second.empty()) by_child_.erase(child);
  return true;
}

std::vector<std::string> ClientLeases::ReleaseAll(const std::string& child_id) {
  auto child = by_child_.find(child_id);
  if (child == by_child_.end()) return {};
  std::vector<std::string> released(child->second.begin(), child->second.end());
  for (const std::string& client_id : released) holder_.erase(client_id);
  by_child_.erase(child);
  return released;
}

const std::string* ClientLeases::HolderOf(const std::string& client_id) const {
  auto held = holder_.find(client_id);
  return held == holder_.end() ? nullptr : &held->second;
}

std::vector<std::string> ClientLeases::HeldBy(const std::string& child_id) const {
  auto child = by_child_.find(child_id);
  if (child == by_child_.end()) return {};
  return std::vector<std::string>(child->second.begin(), child->second.end());
}

}  // namespace fedagg
