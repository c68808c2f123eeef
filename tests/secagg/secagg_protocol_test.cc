// Secure aggregation's stages end to end, in one process (no transport): clients advertise
// keys, share them with their neighbours, send masked inputs that a relay adds modulo
// 2^32, reveal shares sealed to the root, and the root's unmasked sum is the plain sum of
// exactly the inputs that were added — with clients dropping out before sharing, after
// sharing, and after their masked input; below the threshold, with a share changed on its
// way, or with a relay that tells the clients other sets than the root, it refuses.
#include <random>
#include <set>

#include "gtest/gtest.h"
#include "service/secagg/secagg_client.h"
#include "service/secagg/secagg_unmasker.h"

namespace fedagg {
namespace {

struct CohortRun {
  int clients = 12;
  int degree = 12;
  int threshold = 7;
  int bits = 32;
  std::vector<size_t> field_sizes = {257, 3};
  std::set<int> not_shared;      // dropped before sharing keys
  std::set<int> not_masked;      // shared keys, dropped before their masked input
  std::set<int> not_responding;  // masked input in the sum, dropped before unmasking
  uint64_t seed = 1;
  // Changes the relay may make on the way (none by default).
  bool tamper_unmasking = false;
  bool tamper_share = false;
  int hide_from_one_client = -1;  // tell one client this masked client is not in the sum
};

struct Outcome {
  absl::StatusOr<std::vector<std::vector<uint32_t>>> unmasked = absl::UnknownError("not run");
  std::vector<std::vector<uint32_t>> expected;
  absl::Status client_refusal;  // the first refusal of a client, if any
};

Outcome RunCohort(const CohortRun& run) {
  Outcome outcome;
  std::mt19937_64 rng(run.seed);
  absl::StatusOr<SecAggUnmasker> root = SecAggUnmasker::Create();
  EXPECT_TRUE(root.ok());
  std::vector<SecAggClient> clients;
  SecAggCohort cohort;
  cohort.context = "aggregation 'secure'|incarnation 1";
  cohort.threshold = run.threshold;
  cohort.bits = run.bits;
  cohort.field_sizes = run.field_sizes;
  cohort.root_public_key = root->public_key();
  MaskSeed order;
  order.bytes[0] = static_cast<uint8_t>(run.seed);
  cohort.graph = *NeighbourGraph::Harary(run.clients, run.degree, order);
  for (int c = 0; c < run.clients; ++c) {
    absl::StatusOr<SecAggClient> client = SecAggClient::Create();
    EXPECT_TRUE(client.ok());
    cohort.keys.push_back(client->keys());
    clients.push_back(*std::move(client));
  }
  const int n = run.clients;
  std::vector<bool> shared(n, false), masked(n, false);
  std::vector<SharedKeys> messages;
  for (int c = 0; c < n; ++c) {
    if (run.not_shared.contains(c)) continue;
    absl::StatusOr<std::vector<SharedKeys>> sent = clients[c].ShareKeys(cohort, c);
    EXPECT_TRUE(sent.ok()) << sent.status();
    for (SharedKeys& message : *sent) messages.push_back(std::move(message));
    shared[c] = true;
  }
  if (run.tamper_share) messages[0].sealed[20] ^= 1;
  const uint32_t modulus_mask = run.bits >= 32 ? 0xffffffffu : (uint32_t{1} << run.bits) - 1;
  std::vector<std::vector<uint32_t>> masked_sum, expected;
  for (size_t size : run.field_sizes) {
    masked_sum.emplace_back(size, 0);
    expected.emplace_back(size, 0);
  }
  for (int c = 0; c < n; ++c) {
    if (!shared[c] || run.not_masked.contains(c)) continue;
    std::vector<SharedKeys> received;
    for (const SharedKeys& message : messages) {
      if (message.to == c) received.push_back(message);
    }
    std::vector<std::vector<uint32_t>> input;
    for (size_t size : run.field_sizes) {
      input.emplace_back(size);
      for (uint32_t& value : input.back()) value = static_cast<uint32_t>(rng()) & modulus_mask;
    }
    absl::StatusOr<std::vector<std::vector<uint32_t>>> sent = clients[c].MaskInput(cohort, received, input);
    if (!sent.ok()) {
      if (outcome.client_refusal.ok()) outcome.client_refusal = sent.status();
      continue;
    }
    for (size_t f = 0; f < input.size(); ++f) {
      for (size_t i = 0; i < input[f].size(); ++i) {
        masked_sum[f][i] += (*sent)[f][i];  // the relay's addition, modulo 2^32
        expected[f][i] = (expected[f][i] + input[f][i]) & modulus_mask;
        EXPECT_LE((*sent)[f][i], modulus_mask);
      }
    }
    masked[c] = true;
  }
  std::vector<UnmaskingShares> responses;
  for (int c = 0; c < n; ++c) {
    if (!masked[c] || run.not_responding.contains(c)) continue;
    std::vector<bool> told = masked;
    if (run.hide_from_one_client >= 0 && c == cohort.graph.NeighboursOf(run.hide_from_one_client)[0]) {
      told[run.hide_from_one_client] = false;
    }
    absl::StatusOr<UnmaskingShares> response = clients[c].Unmask(cohort, told);
    if (!response.ok()) {
      if (outcome.client_refusal.ok()) outcome.client_refusal = response.status();
      continue;
    }
    responses.push_back(*std::move(response));
  }
  if (run.tamper_unmasking) responses[0].sealed[30] ^= 1;
  ThreadPool pool(2);
  outcome.unmasked = root->Unmask(cohort, shared, masked, responses, std::move(masked_sum), &pool);
  outcome.expected = std::move(expected);
  return outcome;
}

TEST(SecAggProtocolTest, WithoutDropoutsTheUnmaskedSumIsThePlainSum) {
  Outcome outcome = RunCohort(CohortRun{});
  ASSERT_TRUE(outcome.unmasked.ok()) << outcome.unmasked.status();
  EXPECT_EQ(*outcome.unmasked, outcome.expected);
}

TEST(SecAggProtocolTest, DropoutsAtEveryStageLeaveExactlyTheSumOfWhatWasAdded) {
  for (uint64_t seed : {1, 2, 3}) {
    for (int bits : {16, 32}) {
      CohortRun run;
      run.clients = 60;
      run.degree = 30;
      run.threshold = 10;
      run.bits = bits;
      run.field_sizes = {1000, 17};
      run.seed = seed;
      // About 10% at each of the three stages (30% of the cohort), a different set per seed.
      std::mt19937_64 pick(seed * 1000 + bits);
      for (int c = 0; c < run.clients; ++c) {
        switch (pick() % 10) {
          case 0: run.not_shared.insert(c); break;
          case 1: run.not_masked.insert(c); break;
          case 2: run.not_responding.insert(c); break;
          default: break;
        }
      }
      Outcome outcome = RunCohort(run);
      ASSERT_TRUE(outcome.unmasked.ok()) << outcome.unmasked.status() << " seed " << seed << " bits " << bits;
      EXPECT_EQ(*outcome.unmasked, outcome.expected) << "seed " << seed << " bits " << bits;
      EXPECT_TRUE(outcome.client_refusal.ok()) << outcome.client_refusal;
    }
  }
}

TEST(SecAggProtocolTest, BelowTheThresholdTheRootRefusesToUnmask) {
  CohortRun run;  // 12 clients, threshold 7
  run.not_responding = {0, 1, 2, 3, 4, 5};  // 6 of the 12 answer: fewer shares than 7
  Outcome outcome = RunCohort(run);
  EXPECT_EQ(outcome.unmasked.status().code(), absl::StatusCode::kFailedPrecondition) << outcome.unmasked.status();
  EXPECT_NE(outcome.unmasked.status().message().find("too many clients dropped out"), std::string::npos);
}

TEST(SecAggProtocolTest, AChangedShareOrUnmaskingMessageIsRefusedNotSummedWrong) {
  CohortRun share;
  share.tamper_share = true;
  Outcome shared = RunCohort(share);
  EXPECT_EQ(shared.client_refusal.code(), absl::StatusCode::kDataLoss) << shared.client_refusal;
  CohortRun unmasking;
  unmasking.tamper_unmasking = true;
  Outcome unmasked = RunCohort(unmasking);
  EXPECT_EQ(unmasked.unmasked.status().code(), absl::StatusCode::kDataLoss) << unmasked.unmasked.status();
}

TEST(SecAggProtocolTest, ARelayThatTellsAClientOtherSetsIsCaught) {
  CohortRun run;
  run.hide_from_one_client = 3;  // one neighbour of client 3 is told 3's input is not in the sum
  Outcome outcome = RunCohort(run);
  // That neighbour reveals client 3's mask key where the root needs its seed: refused, and
  // no client's secrets are both revealed.
  EXPECT_EQ(outcome.unmasked.status().code(), absl::StatusCode::kDataLoss) << outcome.unmasked.status();
}

}  // namespace
}  // namespace fedagg
