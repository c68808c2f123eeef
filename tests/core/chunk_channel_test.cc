// Tests of ChunkChannel: chunks reach the consumer in order, the producer is paused when
// the queue is full and resumed once there is room, and the end of the stream (early or
// not) reaches the consumer after the chunks queued before it.
#include "service/core/chunk_channel.h"

#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "service/core/mutex.h"
#include "tests/core/core_test_util.h"

namespace fedagg {
namespace {

using ::fedagg::testing::StatusIs;

std::string Next(ChunkChannel& channel) {
  absl::StatusOr<absl::string_view> chunk = channel.Next();
  EXPECT_TRUE(chunk.ok()) << chunk.status();
  return chunk.ok() ? std::string(*chunk) : std::string();
}

TEST(ChunkChannelTest, PausesTheProducerWhenFullAndResumesItOnceThereIsRoom) {
  int resumed = 0;
  ChunkChannel channel(10, [&resumed] { ++resumed; });
  EXPECT_TRUE(channel.Put("abcd"));
  EXPECT_TRUE(channel.Put("efgh"));
  EXPECT_FALSE(channel.Put("ijkl"));  // 12 bytes queued: full
  EXPECT_EQ(Next(channel), "abcd");   // 8 queued: room again
  EXPECT_EQ(resumed, 1);
  EXPECT_EQ(Next(channel), "efgh");
  EXPECT_EQ(resumed, 1);  // resumed once per pause
  EXPECT_TRUE(channel.Put("mn"));
  EXPECT_EQ(Next(channel), "ijkl");
  EXPECT_EQ(Next(channel), "mn");
  EXPECT_EQ(resumed, 1);
}

TEST(ChunkChannelTest, TheEndComesAfterTheQueuedChunks) {
  ChunkChannel early(100, [] {});
  early.Put("ab");
  early.Close(absl::InvalidArgumentError("partial incomplete: 2 of 9 bytes"));
  EXPECT_EQ(Next(early), "ab");
  EXPECT_TRUE(StatusIs(early.Next(), absl::StatusCode::kInvalidArgument, "partial incomplete: 2 of 9 bytes"));
  EXPECT_TRUE(StatusIs(early.Next(), absl::StatusCode::kInvalidArgument, "partial incomplete"));

  // Ended normally: asking for more than the stream carried is a loss of data.
  ChunkChannel normal(100, [] {});
  normal.Put("ab");
  normal.Close(absl::OkStatus());
  EXPECT_EQ(Next(normal), "ab");
  EXPECT_TRUE(StatusIs(normal.Next(), absl::StatusCode::kDataLoss, "the stream ended before"));
}

// A producer that waits while paused, as the RPC's reads do, and a consumer on another
// thread: every byte arrives once, in order.
TEST(ChunkChannelTest, AProducerAndAConsumerOnTwoThreadsHandOverEveryChunkInOrder) {
  constexpr int kChunks = 2000;
  constexpr uint64_t kMaxQueued = 64;
  Mutex mu;
  bool may_put = true;
  ChunkChannel channel(kMaxQueued, [&] {
    MutexLock lock(&mu);
    may_put = true;
  });
  std::thread producer([&] {
    for (int i = 0; i < kChunks; ++i) {
      {
        MutexLock lock(&mu);
        mu.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return may_put; });
        may_put = false;
      }
      const bool room = channel.Put(std::string(1 + i % 40, static_cast<char>('a' + i % 26)));
      if (room) {
        MutexLock lock(&mu);
        may_put = true;
      }
    }
    channel.Close(absl::OkStatus());
  });
  std::string received;
  for (int i = 0; i < kChunks; ++i) received += Next(channel);
  EXPECT_TRUE(StatusIs(channel.Next(), absl::StatusCode::kDataLoss, "ended"));
  producer.join();
  std::string expected;
  for (int i = 0; i < kChunks; ++i) expected += std::string(1 + i % 40, static_cast<char>('a' + i % 26));
  EXPECT_EQ(received, expected);
}

}  // namespace
}  // namespace fedagg
