// ClientIdSet and ClientIdList: a set of strings against a model (std::set and the order
// of insertion), lists that keep what they saw while the set changes, compaction after
// erasures, a set made from a list, a set moved from, and a list read and dropped on
// another thread while the set grows, erases and compacts.
#include "service/rounds/client_id_set.h"

#include <atomic>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace fedagg {
namespace {

// The model: the ids in the set, in the order they were (last) inserted.
class Model {
 public:
  bool Insert(const std::string& id) {
    if (!ids_.insert(id).second) return false;
    order_.push_back(id);
    return true;
  }
  bool Erase(const std::string& id) {
    if (ids_.erase(id) == 0) return false;
    std::erase(order_, id);
    return true;
  }
  const std::vector<std::string>& order() const { return order_; }

 private:
  std::set<std::string> ids_;
  std::vector<std::string> order_;
};

// The ids prefix + i for i in [begin, end), in order.
std::vector<std::string> IdsOf(const char* prefix, int begin, int end) {
  std::vector<std::string> ids;
  for (int i = begin; i < end; ++i) ids.push_back(absl::StrCat(prefix, i));
  return ids;
}

TEST(ClientIdSetTest, IsASetOfStrings) {
  ClientIdSet set;
  EXPECT_TRUE(set.empty());
  EXPECT_TRUE(set.insert("alice"));
  EXPECT_FALSE(set.insert("alice"));
  EXPECT_TRUE(set.insert(""));  // ids are bytes: the empty one and NULs inside are ids too
  EXPECT_TRUE(set.insert(std::string("a\0b", 3)));
  EXPECT_TRUE(set.contains(std::string("a\0b", 3)));
  EXPECT_FALSE(set.contains("a"));
  EXPECT_EQ(set.size(), 3u);
  EXPECT_FALSE(set.erase("bob"));
  EXPECT_TRUE(set.erase("alice"));
  EXPECT_FALSE(set.contains("alice"));
  EXPECT_EQ(set.Snapshot().ToVector(), (std::vector<std::string>{"", std::string("a\0b", 3)}));
}

TEST(ClientIdSetTest, AnIdLargerThanABlockGetsABlockOfItsOwn) {
  ClientIdSet set;
  const std::string large(3 << 20, 'x');
  ASSERT_TRUE(set.insert("before"));
  ASSERT_TRUE(set.insert(large));
  ASSERT_TRUE(set.insert("after"));
  EXPECT_TRUE(set.contains(large));
  EXPECT_EQ(set.Snapshot().ToVector(), (std::vector<std::string>{"before", large, "after"}));
}

// A list shows the set as it was when taken, whatever the set does after.
TEST(ClientIdSetTest, AListKeepsWhatItSaw) {
  ClientIdSet set;
  for (const std::string& id : IdsOf("client-", 0, 1000)) set.insert(id);
  const ClientIdList before = set.Snapshot();
  ASSERT_TRUE(set.erase("client-7"));
  ASSERT_TRUE(set.insert("client-new"));
  ASSERT_TRUE(set.insert("client-7"));  // back, at the end of the order
  std::vector<std::string> expected = IdsOf("client-", 0, 1000);
  EXPECT_EQ(before.size(), 1000u);
  EXPECT_EQ(before.ToVector(), expected);
  std::erase(expected, "client-7");
  expected.push_back("client-new");
  expected.push_back("client-7");
  const ClientIdList after = set.Snapshot();
  EXPECT_EQ(after.size(), 1001u);
  EXPECT_EQ(after.ToVector(), expected);
}

// Once erased ids hold more bytes than the ids left, the set copies those into fresh
// blocks; lists taken before still read the old ones.
TEST(ClientIdSetTest, ErasuresAreCompactedAway) {
  ClientIdSet set;
  for (const std::string& id : IdsOf("client-", 0, 20000)) set.insert(id);
  const ClientIdList full = set.Snapshot();
  const size_t full_bytes = set.memory_bytes();
  for (const std::string& id : IdsOf("client-", 0, 19000)) ASSERT_TRUE(set.erase(id));
  EXPECT_LT(set.memory_bytes(), full_bytes / 4) << "erased ids' bytes were kept";
  EXPECT_EQ(set.Snapshot().ToVector(), IdsOf("client-", 19000, 20000));
  EXPECT_EQ(full.size(), 20000u);
  EXPECT_EQ(full.ToVector().front(), "client-0");
  EXPECT_EQ(full.ToVector().back(), "client-19999");
}

// Random inserts, erases and lists against the model; every list is checked at the end,
// after the set went on changing.
TEST(ClientIdSetTest, MatchesAModelUnderRandomChanges) {
  std::mt19937 rng(20261129);
  ClientIdSet set;
  Model model;
  std::vector<std::pair<ClientIdList, std::vector<std::string>>> lists;
  for (int step = 0; step < 200000; ++step) {
    const std::string id = absl::StrCat("c", rng() % 5000);
    switch (rng() % 10) {
      case 0:
      case 1:
      case 2:
      case 3:
        ASSERT_EQ(set.erase(id), model.Erase(id)) << id;
        break;
      case 4:
        if (step % 97 == 0) lists.emplace_back(set.Snapshot(), model.order());
        break;
      default:
        ASSERT_EQ(set.insert(id), model.Insert(id)) << id;
    }
    ASSERT_EQ(set.size(), model.order().size());
  }
  EXPECT_EQ(set.Snapshot().ToVector(), model.order());
  ASSERT_GT(lists.size(), 100u);
  for (const auto& [list, order] : lists) {
    EXPECT_EQ(list.size(), order.size());
    EXPECT_EQ(list.ToVector(), order);
  }
}

// A restore: the set made from a list holds its ids, counts more after them, and its
// erasures do not show in the list.
TEST(ClientIdSetTest, ASetMadeFromAListGoesOn) {
  ClientIdSet original;
  for (const char* id : {"a", "b", "c", "d"}) original.insert(id);
  original.erase("b");
  const ClientIdList list = original.Snapshot();
  ClientIdSet restored(list);
  EXPECT_EQ(restored.size(), 3u);
  EXPECT_TRUE(restored.contains("a"));
  EXPECT_FALSE(restored.contains("b"));
  EXPECT_FALSE(restored.insert("c"));
  EXPECT_TRUE(restored.insert("b"));
  EXPECT_TRUE(restored.insert("e"));
  EXPECT_TRUE(restored.erase("a"));
  EXPECT_EQ(restored.Snapshot().ToVector(), (std::vector<std::string>{"c", "d", "b", "e"}));
  EXPECT_EQ(list.ToVector(), (std::vector<std::string>{"a", "c", "d"}));
  EXPECT_EQ(original.Snapshot().ToVector(), (std::vector<std::string>{"a", "c", "d"}));
}

// What a checkpoint does: a list read on another thread, then dropped there, while the
// set keeps counting (new ids in the block the list shares, new blocks), erasing and
// compacting. Meant for ThreadSanitizer.
TEST(ClientIdSetTest, AListIsReadAndDroppedWhileTheSetChanges) {
  ClientIdSet set;
  for (const std::string& id : IdsOf("early-", 0, 2000)) set.insert(id);
  for (const std::string& id : IdsOf("early-", 0, 100)) set.erase(id);  // the list shares erasures
  std::optional<ClientIdList> list = set.Snapshot();
  const std::vector<std::string> expected = list->ToVector();
  ASSERT_EQ(expected.size(), 1900u);
  std::atomic<bool> writing_done = false;
  std::atomic<bool> list_dropped = false;
  std::thread reader([&] {
    int passes = 0;
    while (!writing_done.load() || passes < 3) {
      EXPECT_EQ(list->ToVector(), expected);
      ++passes;
    }
    list.reset();  // the last reference to the shared blocks and erasures, on this thread
    list_dropped = true;
  });
  for (const std::string& id : IdsOf("late-", 0, 50000)) set.insert(id);
  for (const std::string& id : IdsOf("early-", 100, 2000)) set.erase(id);
  const size_t before_compaction = set.memory_bytes();
  for (const std::string& id : IdsOf("late-", 0, 30000)) set.erase(id);  // compacts while read
  EXPECT_LT(set.memory_bytes(), before_compaction);
  writing_done = true;
  while (!list_dropped.load()) std::this_thread::yield();
  // Erasing after the list is gone, and compacting again.
  for (const std::string& id : IdsOf("late-", 30000, 45000)) ASSERT_TRUE(set.erase(id));
  reader.join();
  std::vector<std::string> left = IdsOf("late-", 45000, 50000);
  EXPECT_EQ(set.Snapshot().ToVector(), left);

  // A list read and dropped on another thread with nothing ordering that with the set's
  // next erasure (a relaxed flag): the erasure must not change, in place, the erasures
  // the list read.
  ASSERT_TRUE(set.erase("late-49999"));  // so that the list shares an erased id
  left.pop_back();
  std::optional<ClientIdList> second = set.Snapshot();
  std::atomic<bool> second_dropped = false;
  std::thread second_reader([&] {
    EXPECT_EQ(second->ToVector(), left);
    second.reset();
    second_dropped.store(true, std::memory_order_relaxed);
  });
  while (!second_dropped.load(std::memory_order_relaxed)) std::this_thread::yield();
  EXPECT_TRUE(set.erase("late-45000"));
  second_reader.join();
}

// A set moved from is empty and counts again from nothing; the one moved to goes on.
TEST(ClientIdSetTest, ASetMovedFromIsEmptyAndUsable) {
  ClientIdSet from;
  for (const char* id : {"a", "b", "c"}) from.insert(id);
  from.erase("b");
  ClientIdSet to = std::move(from);
  EXPECT_TRUE(from.empty());  // NOLINT(bugprone-use-after-move): what this test checks
  EXPECT_EQ(from.memory_bytes(), 0u);
  EXPECT_TRUE(from.insert("z"));
  EXPECT_TRUE(to.insert("d"));
  EXPECT_EQ(from.Snapshot().ToVector(), (std::vector<std::string>{"z"}));
  EXPECT_EQ(to.Snapshot().ToVector(), (std::vector<std::string>{"a", "c", "d"}));
}

// A set made from a list with erasures counts their bytes, and compacts them away once
// erasures outweigh the ids left.
TEST(ClientIdSetTest, ASetMadeFromAListWithErasuresCompacts) {
  ClientIdSet original;
  for (const std::string& id : IdsOf("client-", 0, 10000)) original.insert(id);
  for (const std::string& id : IdsOf("client-", 0, 4000)) original.erase(id);
  ClientIdSet restored(original.Snapshot());
  const size_t adopted_bytes = restored.memory_bytes();
  for (const std::string& id : IdsOf("client-", 4000, 9000)) ASSERT_TRUE(restored.erase(id));
  EXPECT_LT(restored.memory_bytes(), adopted_bytes / 4) << "the adopted blocks were kept";
  EXPECT_EQ(restored.Snapshot().ToVector(), IdsOf("client-", 9000, 10000));
  EXPECT_EQ(original.size(), 6000u);
}

}  // namespace
}  // namespace fedagg
