// Test support: Contribute and Submit calls driven message by message, without the client
// library's pacing — to hold an update open, stall in the middle of one, or send what no
// well-behaved client sends, even bytes that are not protobuf — plus builders for the raw
// messages of a dense update.
#ifndef FEDAGG_TESTS_INTEGRATION_RAW_STREAMS_H_
#define FEDAGG_TESTS_INTEGRATION_RAW_STREAMS_H_

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/generic/generic_stub.h>

#include "absl/status/statusor.h"
#include "fedagg/v1/aggregation.grpc.pb.h"
#include "service/core/crc32c.h"
#include "service/rpc/grpc_status.h"
#include "tests/integration/test_cluster.h"

namespace fedagg::testing {

// Header of an update with one entry per field (nnz 0 for dense fields).
inline v1::ContributeRequest HeaderRequest(const std::string& aggregation_id, int fields) {
  v1::ContributeRequest request;
  request.mutable_header()->set_aggregation_id(aggregation_id);
  for (int f = 0; f < fields; ++f) request.mutable_header()->add_fields();
  return request;
}

inline v1::ContributeRequest ChunkRequest(int field, uint64_t offset, const std::string& data) {
  v1::ContributeRequest request;
  request.mutable_chunk()->set_field(field);
  request.mutable_chunk()->set_section(v1::VALUES);
  request.mutable_chunk()->set_offset(offset);
  request.mutable_chunk()->set_data(data);
  return request;
}

inline v1::ContributeRequest EndRequest(const std::string& all_bytes) {
  v1::ContributeRequest request;
  request.mutable_end()->set_crc32c(Crc32cExtend(0, all_bytes.data(), all_bytes.size()));
  return request;
}

inline std::string BytesOf(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

// One Contribute stream: Hello/Welcome on construction, then messages one by one.
class RawContributeStream {
 public:
  RawContributeStream(int port, const std::string& client_id, const std::string& token = "")
      : stub_(v1::Aggregation::NewStub(Connect(port))) {
    if (!token.empty()) context_.AddMetadata("authorization", "Bearer " + token);
    stream_ = stub_->Contribute(&context_);
    v1::ContributeRequest hello;
    hello.mutable_hello()->set_protocol_version(1);
    hello.mutable_hello()->set_client_id(client_id);
    v1::ContributeResponse welcome;
    open_ = stream_->Write(hello) && stream_->Read(&welcome) && welcome.has_welcome();
  }
  ~RawContributeStream() {
    if (finished_) return;
    context_.TryCancel();
    (void)Finish();
  }

  bool open() const { return open_; }
  bool Write(const v1::ContributeRequest& request) { return stream_->Write(request); }
  // The next response, or the stream's final status when it ended.
  absl::StatusOr<v1::ContributeResponse> Read() {
    v1::ContributeResponse response;
    if (stream_->Read(&response)) return response;
    return Finish();
  }
  // Half-closes; the server discards an update in progress.
  absl::Status Close() {
    stream_->WritesDone();
    v1::ContributeResponse ignored;
    while (stream_->Read(&ignored)) {
    }
    return Finish();
  }

 private:
  absl::Status Finish() {
    finished_ = true;
    return FromGrpcStatus(stream_->Finish());
  }

  grpc::ClientContext context_;
  std::unique_ptr<v1::Aggregation::Stub> stub_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::ContributeRequest, v1::ContributeResponse>> stream_;
  bool open_ = false;
  bool finished_ = false;
};

// Calls `method` ("/fedagg.v1.Aggregation/Contribute") sending `messages` as they are —
// which need not be valid protobuf — then half-closes, reads every response and returns
// the call's status.
inline absl::Status CallWithRawBytes(int port, const std::string& method,
                                     const std::vector<std::string>& messages) {
  grpc::GenericStub stub(Connect(port));
  grpc::ClientContext context;
  grpc::CompletionQueue queue;
  void* tag = nullptr;
  bool ok = false;
  auto await = [&] { return queue.Next(&tag, &ok) && ok; };
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call = stub.PrepareCall(&context, method, &queue);
  call->StartCall(nullptr);
  await();
  for (const std::string& message : messages) {
    grpc::Slice slice(message);
    grpc::ByteBuffer buffer(&slice, 1);
    call->Write(buffer, nullptr);
    if (!await()) break;
  }
  call->WritesDone(nullptr);
  await();
  grpc::ByteBuffer response;
  do {
    call->Read(&response, nullptr);
  } while (await());
  grpc::Status status;
  call->Finish(&status, nullptr);
  await();
  return FromGrpcStatus(status);
}

}  // namespace fedagg::testing

#endif  // FEDAGG_TESTS_INTEGRATION_RAW_STREAMS_H_
