// The C++ client library from an installed fedagg (find_package(fedagg), fedagg::client):
// connects to a server, creates an aggregation of one float32[3] field averaged with
// federated_mean, contributes two updates, seals it and prints the result.
// Usage: fedagg_client_example HOST:PORT [AGGREGATION_ID]
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <string>
#include <vector>

#include "client_stub/client.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s HOST:PORT [AGGREGATION_ID]\n", argv[0]);
    return 2;
  }
  const std::string id = argc > 2 ? argv[2] : "example";
  auto channel = fedagg::ConnectToFedagg(argv[1], grpc::InsecureChannelCredentials());
  fedagg::ControlClient control(channel);

  fedagg::v1::AggregationSpec spec;
  spec.set_aggregation_id(id);
  spec.mutable_value_type()->mutable_tensor()->set_dtype(fedagg::v1::DTYPE_FLOAT32);
  spec.mutable_value_type()->mutable_tensor()->add_shape(3);
  spec.add_intrinsics()->set_intrinsic(fedagg::v1::FEDERATED_MEAN);
  spec.set_min_contributions(2);
  if (auto created = control.Create(spec); !created.ok()) {
    std::fprintf(stderr, "create: %s\n", created.status().ToString().c_str());
    return 1;
  }

  const std::vector<std::vector<float>> updates = {{1, 2, 3}, {3, 4, 5}};
  for (size_t i = 0; i < updates.size(); ++i) {
    auto stream = fedagg::ContributeStream::Open(channel, "example-client-" + std::to_string(i));
    if (!stream.ok()) {
      std::fprintf(stderr, "open: %s\n", stream.status().ToString().c_str());
      return 1;
    }
    fedagg::UpdateView update{{fedagg::FieldValue::Dense<float>(updates[i])}, std::nullopt};
    if (auto ack = (*stream)->Contribute(spec, update); !ack.ok()) {
      std::fprintf(stderr, "contribute: %s\n", ack.status().ToString().c_str());
      return 1;
    }
    (void)(*stream)->Close();
  }

  if (auto sealed = control.Seal(id); !sealed.ok()) {
    std::fprintf(stderr, "seal: %s\n", sealed.status().ToString().c_str());
    return 1;
  }
  auto final_status = control.WatchUntilFinal(id);
  if (!final_status.ok() || final_status->state() != fedagg::v1::FINALIZED) {
    std::fprintf(stderr, "aggregation did not finalize: %s\n",
                 final_status.ok() ? final_status->detail().c_str() : final_status.status().ToString().c_str());
    return 1;
  }
  auto result = control.GetResult(id);
  if (!result.ok()) {
    std::fprintf(stderr, "result: %s\n", result.status().ToString().c_str());
    return 1;
  }
  const auto mean = result->fields[0].value.values<float>();
  std::printf("%s: %lld contributions, mean = [%g, %g, %g]\n", id.c_str(),
              static_cast<long long>(result->contributions), mean[0], mean[1], mean[2]);
  return 0;
}
