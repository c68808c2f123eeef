// Protobuf messages to and from gRPC byte buffers, for the update streams (Contribute,
// Submit), which gRPC hands over as raw bytes so that a request that is not a valid
// protobuf is answered with INVALID_ARGUMENT and a message — with typed handlers gRPC
// reports it like a half-close and the client never learns what went wrong.
#ifndef FEDAGG_SERVICE_RPC_RAW_MESSAGE_H_
#define FEDAGG_SERVICE_RPC_RAW_MESSAGE_H_

#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace fedagg {

// Parses `buffer` (consuming it) into `message`; INVALID_ARGUMENT naming the message type
// when the bytes are not a valid encoding of it.
template <typename Message>
absl::Status ParseRawMessage(grpc::ByteBuffer& buffer, Message* message) {
  const size_t size = buffer.Length();
  grpc::Status parsed = grpc::SerializationTraits<Message>::Deserialize(&buffer, message);
  if (parsed.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "malformed protobuf: a message of ", size, " bytes is not a valid ",
      Message::descriptor()->full_name(),
      "; check that the client encodes its requests with fedagg's proto/fedagg/v1 definitions"));
}

// The encoding of `message` (protobuf encoding cannot fail below 2 GiB; fedagg's responses
// are far smaller).
template <typename Message>
grpc::ByteBuffer SerializeRawMessage(const Message& message) {
  grpc::ByteBuffer buffer;
  bool own_buffer = false;
  (void)grpc::SerializationTraits<Message>::Serialize(message, &buffer, &own_buffer);
  return buffer;
}

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_RPC_RAW_MESSAGE_H_
