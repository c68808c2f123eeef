// Test support: starts fedagg servers in-process on loopback ports — a root and any
// number of intermediate aggregators under it — builds specs and updates for tests, and
// waits for what servers do on their own threads.
#ifndef FEDAGG_TESTS_INTEGRATION_TEST_CLUSTER_H_
#define FEDAGG_TESTS_INTEGRATION_TEST_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client_stub/client.h"
#include "gtest/gtest.h"
#include "service/rounds/spec_conversion.h"
#include "service/server.h"

namespace fedagg::testing {

// Polls `condition` until it holds or `timeout` passes (the server acts on other threads).
template <typename Condition>
bool Eventually(Condition condition, absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

inline std::shared_ptr<grpc::Channel> Connect(int port) {
  return grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
}

inline ServerConfig LoopbackConfig() {
  ServerConfig config;
  config.listen_address = "127.0.0.1:0";
  config.metrics_address = "127.0.0.1:0";
  config.batch_size = 4;
  config.child_grace = absl::Seconds(5);
  config.forward_interval = absl::Milliseconds(100);
  return config;
}

struct Cluster {
  std::unique_ptr<FedaggServer> root;
  std::vector<std::unique_ptr<FedaggServer>> intermediates;

  static std::unique_ptr<Cluster> Start(int intermediates, ServerConfig config = LoopbackConfig()) {
    auto cluster = std::make_unique<Cluster>();
    absl::StatusOr<std::unique_ptr<FedaggServer>> root = FedaggServer::Start(config);
    EXPECT_TRUE(root.ok()) << root.status();
    if (!root.ok()) return nullptr;
    cluster->root = *std::move(root);
    for (int i = 0; i < intermediates; ++i) {
      ServerConfig child = config;
      child.parent_address = absl::StrCat("127.0.0.1:", cluster->root->port());
      child.node_id = absl::StrCat("intermediate-", i);
      absl::StatusOr<std::unique_ptr<FedaggServer>> server = FedaggServer::Start(child);
      EXPECT_TRUE(server.ok()) << server.status();
      if (!server.ok()) return nullptr;
      cluster->intermediates.push_back(*std::move(server));
    }
    return cluster;
  }
};

// A spec with one tensor field per entry of `fields`: (name, type text, intrinsic).
struct FieldDecl {
  std::string name;
  std::string type;
  Intrinsic intrinsic;
  bool report_counts = false;
};

inline v1::AggregationSpec MakeSpec(const std::string& id, const std::vector<FieldDecl>& fields,
                                    int64_t min_contributions = 1) {
  v1::AggregationSpec spec;
  spec.set_aggregation_id(id);
  std::vector<std::pair<std::string, ValueType>> struct_fields;
  for (const FieldDecl& field : fields) {
    absl::StatusOr<ValueType> type = ParseValueType(field.type);
    EXPECT_TRUE(type.ok()) << type.status();
    struct_fields.emplace_back(field.name, *type);
    v1::FieldIntrinsic* intrinsic = spec.add_intrinsics();
    intrinsic->set_intrinsic(static_cast<v1::Intrinsic>(static_cast<int>(field.intrinsic)));
    intrinsic->set_report_counts(field.report_counts);
  }
  *spec.mutable_value_type() = ValueTypeToProto(ValueType::Struct(std::move(struct_fields)));
  spec.set_min_contributions(min_contributions);
  return spec;
}

// A one-field int64[2] federated_sum: exact, so tests compare results with ==.
inline v1::AggregationSpec Int64SumSpec(const std::string& id) {
  return MakeSpec(id, {{"w", "int64[2]", Intrinsic::kFederatedSum}});
}

inline UpdateView Int64Update(const std::vector<int64_t>& values) {
  return UpdateView{{FieldValue::Dense<int64_t>(values)}, std::nullopt};
}

inline std::shared_ptr<const ReductionSpec> ReductionOf(const v1::AggregationSpec& spec) {
  absl::StatusOr<AggregationConfig> config = ConfigFromProto(spec);
  EXPECT_TRUE(config.ok()) << config.status();
  return config->reduction;
}

}  // namespace fedagg::testing

#endif  // FEDAGG_TESTS_INTEGRATION_TEST_CLUSTER_H_
