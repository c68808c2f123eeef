// ClientIdSet and ClientIdList: a set of strings against a model (std::set and the order
// of insertion), lists that keep what they saw while the set changes, compaction after
// erasures, a set made from a list, and a list read on another thread while the set grows.
#include "service/rounds/client_id_set.h"

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
  for (int i = 0; i < 1000; ++i) set.insert(absl::StrCat("client-", i));
  const ClientIdList before = set.Snapshot();
  ASSERT_TRUE(set.erase("client-7"));
  ASSERT_TRUE(set.insert("client-new"));
  ASSERT_TRUE(set.insert("client-7"));  // back, at the end of the order
  std::vector<std::string> expected;
  for (int i = 0; i < 1000; ++i) expected.push_back(absl::StrCat("client-", i));
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
  for (int i = 0; i < 20000; ++i) set.insert(absl::StrCat("client-", i));
  const ClientIdList full = set.Snapshot();
  const size_t full_bytes = set.memory_bytes();
  for (int i = 0; i < 19000; ++i) ASSERT_TRUE(set.erase(absl::StrCat("client-", i)));
  EXPECT_LT(set.memory_bytes(), full_bytes / 4) << "erased ids' bytes were kept";
  std::vector<std::string> left;
  for (int i = 19000; i < 20000; ++i) left.push_back(absl::StrCat("client-", i));
  EXPECT_EQ(set.Snapshot().ToVector(), left);
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

// What a checkpoint does: a list read on another thread while the set keeps counting (new
// ids in the block the list shares, new blocks) and erasing. Meant for ThreadSanitizer.
TEST(ClientIdSetTest, AListIsReadWhileTheSetChanges) {
  ClientIdSet set;
  for (int i = 0; i < 100; ++i) set.insert(absl::StrCat("early-", i));
  const ClientIdList list = set.Snapshot();
  const std::vector<std::string> expected = list.ToVector();
  std::thread reader([&list, &expected] {
    for (int pass = 0; pass < 50; ++pass) EXPECT_EQ(list.ToVector(), expected);
  });
  for (int i = 0; i < 50000; ++i) set.insert(absl::StrCat("late-", i));
  for (int i = 0; i < 100; i += 2) set.erase(absl::StrCat("early-", i));
  reader.join();
  EXPECT_EQ(set.size(), 50050u);
}

}  // namespace
}  // namespace fedagg
