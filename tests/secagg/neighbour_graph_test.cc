// SecAgg+'s neighbour graph: every client has the degree's neighbours, the relation is
// symmetric, the same seed gives the same graph, and a large degree is the complete graph.
#include "service/secagg/neighbour_graph.h"

#include "gtest/gtest.h"

namespace fedagg {
namespace {

TEST(NeighbourGraphTest, HararyGraphHasTheDegreeAndIsSymmetricAndSeeded) {
  MaskSeed seed;
  seed.bytes[0] = 42;
  absl::StatusOr<NeighbourGraph> graph = NeighbourGraph::Harary(101, 8, seed);
  ASSERT_TRUE(graph.ok()) << graph.status();
  for (int c = 0; c < 101; ++c) {
    ASSERT_EQ(graph->NeighboursOf(c).size(), 8u) << "client " << c;
    for (int n : graph->NeighboursOf(c)) {
      EXPECT_NE(n, c);
      EXPECT_TRUE(graph->AreNeighbours(n, c));
    }
  }
  absl::StatusOr<NeighbourGraph> again = NeighbourGraph::Harary(101, 8, seed);
  seed.bytes[0] = 43;
  absl::StatusOr<NeighbourGraph> other = NeighbourGraph::Harary(101, 8, seed);
  bool same = true, differs = false;
  for (int c = 0; c < 101; ++c) {
    same = same && std::equal(graph->NeighboursOf(c).begin(), graph->NeighboursOf(c).end(),
                              again->NeighboursOf(c).begin(), again->NeighboursOf(c).end());
    differs = differs || !std::equal(graph->NeighboursOf(c).begin(), graph->NeighboursOf(c).end(),
                                     other->NeighboursOf(c).begin(), other->NeighboursOf(c).end());
  }
  EXPECT_TRUE(same);
  EXPECT_TRUE(differs);
}

TEST(NeighbourGraphTest, ADegreeOfTheCohortIsTheCompleteGraph) {
  absl::StatusOr<NeighbourGraph> graph = NeighbourGraph::Harary(5, 8, MaskSeed{});
  ASSERT_TRUE(graph.ok());
  EXPECT_EQ(graph->degree(), 4);
  for (int c = 0; c < 5; ++c) EXPECT_EQ(graph->NeighboursOf(c).size(), 4u);
  EXPECT_EQ(NeighbourGraph::Harary(5, 3, MaskSeed{}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NeighbourGraph::Harary(1, 2, MaskSeed{}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fedagg
