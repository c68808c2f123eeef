// fedagg's C++ client library.
#include "client_stub/client.h"

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client_stub/encoding_conversion.h"
#include "client_stub/update_encoder.h"
#include "service/core/status_macros.h"
#include "service/core/update_validator.h"
#include "service/rounds/spec_conversion.h"
#include "service/rpc/grpc_status.h"

namespace fedagg {
namespace {

void PrepareContext(grpc::ClientContext& context, const CallOptions& options, bool with_deadline) {
  if (!options.token.empty()) context.AddMetadata("authorization", "Bearer " + options.token);
  if (with_deadline) context.set_deadline(absl::ToChronoTime(absl::Now() + options.timeout));
}

// Writes every piece of the update with `write` (which takes a ContributeRequest or a
// SubmitRequest); false when a write failed. Contribute streams name the client in Hello,
// so their headers carry no client id (`client_id` empty). The header asks for `ack_level`.
template <typename Request, typename Write>
bool WriteUpdate(const std::string& aggregation_id, const std::string& client_id, const UpdateView& update,
                 size_t chunk_bytes, v1::AckLevel ack_level, Write write) {
  UpdateEncoder encoder(aggregation_id, client_id, update, chunk_bytes);
  Request request;
  while (!encoder.done()) {
    encoder.Next(request);
    if (request.has_header()) request.mutable_header()->set_ack_level(ack_level);
    if (!write(request)) return false;
  }
  return true;
}

// `update` with every field in the encoding `spec` declares (encoding_conversion.h),
// validated as the server validates it.
absl::StatusOr<ConvertedUpdate> PrepareLocally(const v1::AggregationSpec& spec, const UpdateView& update,
                                               std::optional<uint64_t> encoding_seed) {
  FEDAGG_ASSIGN_OR_RETURN(AggregationConfig config, ConfigFromProto(spec));
  FEDAGG_ASSIGN_OR_RETURN(ConvertedUpdate prepared, ConvertedUpdate::Of(*config.reduction, update, encoding_seed));
  FEDAGG_RETURN_IF_ERROR(ValidateUpdate(*config.reduction, prepared.view()));
  return prepared;
}

// A stream that ended with one of these codes broke for a passing reason (server restart,
// connection reset, shutdown, a stalled update discarded): reopening it and sending the
// update again is worthwhile.
bool IsPassingStreamEnd(absl::StatusCode code) {
  return code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kCancelled ||
         code == absl::StatusCode::kDeadlineExceeded || code == absl::StatusCode::kAborted;
}

// A rejection that asks for the same update again after a backoff (docs/PROTOCOL.md 3.6,
// 8.3): UNAVAILABLE, and RESOURCE_EXHAUSTED from the memory budget (whose message starts as
// the protocol fixes it; RESOURCE_EXHAUSTED from max_contributions is final).
bool AsksForResend(const absl::Status& rejection) {
  return rejection.code() == absl::StatusCode::kUnavailable ||
         (rejection.code() == absl::StatusCode::kResourceExhausted &&
          absl::StartsWith(rejection.message(), "memory budget reached"));
}

}  // namespace

grpc::ChannelArguments FedaggChannelArguments(absl::Duration keepalive) {
  grpc::ChannelArguments args;
  const int keepalive_ms = static_cast<int>(absl::ToInt64Milliseconds(keepalive));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, keepalive_ms);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, keepalive_ms);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);  // a stream waiting for its ack sends no data
  return args;
}

std::shared_ptr<grpc::Channel> ConnectToFedagg(const std::string& target,
                                               const std::shared_ptr<grpc::ChannelCredentials>& credentials,
                                               absl::Duration keepalive) {
  return grpc::CreateCustomChannel(target, credentials, FedaggChannelArguments(keepalive));
}

absl::StatusOr<std::unique_ptr<ContributeStream>> ContributeStream::Open(
    std::shared_ptr<grpc::Channel> channel, const std::string& client_id,
    const CallOptions& options) {
  std::unique_ptr<ContributeStream> stream(new ContributeStream());
  stream->client_id_ = client_id;
  stream->options_ = options;
  stream->stub_ = v1::Aggregation::NewStub(channel);
  FEDAGG_RETURN_IF_ERROR(stream->Connect());
  return stream;
}

absl::Status ContributeStream::Connect() {
  auto call = std::make_unique<Call>();
  PrepareContext(call->context, options_, /*with_deadline=*/false);
  call->stream = stub_->Contribute(&call->context);
  v1::ContributeRequest hello;
  hello.mutable_hello()->set_protocol_version(1);
  hello.mutable_hello()->set_client_id(client_id_);
  v1::ContributeResponse response;
  if (!call->stream->Write(hello) || !call->stream->Read(&response)) {
    absl::Status status = FromGrpcStatus(call->stream->Finish());
    return status.ok() ? absl::UnavailableError("the server ended the stream without answering Hello") : status;
  }
  if (!response.has_welcome()) {
    call->context.TryCancel();
    (void)call->stream->Finish();
    return absl::InternalError("the server answered Hello with something other than Welcome");
  }
  welcome_ = response.welcome();
  call_ = std::move(call);
  return absl::OkStatus();
}

ContributeStream::~ContributeStream() {
  if (call_ != nullptr) {
    call_->context.TryCancel();
    (void)call_->stream->Finish();
  }
}

absl::Status ContributeStream::FinishBrokenCall() {
  absl::Status status = FromGrpcStatus(call_->stream->Finish());
  call_.reset();
  return status.ok() ? absl::UnavailableError("the server closed the stream without answering") : status;
}

absl::StatusOr<v1::Ack> ContributeStream::AwaitAnswer() {
  v1::ContributeResponse response;
  if (!call_->stream->Read(&response)) return FinishBrokenCall();
  if (response.has_ack()) return response.ack();
  if (response.has_rejection()) {
    return absl::Status(static_cast<absl::StatusCode>(response.rejection().code()),
                        response.rejection().message());
  }
  return absl::InternalError("unexpected response while waiting for an ack");
}

absl::StatusOr<v1::Ack> ContributeStream::Contribute(const v1::AggregationSpec& spec,
                                                     const UpdateView& update) {
  FEDAGG_ASSIGN_OR_RETURN(const ConvertedUpdate prepared, PrepareLocally(spec, update, options_.encoding_seed));
  return ContributeUnchecked(spec.aggregation_id(), prepared.view());
}

absl::StatusOr<v1::Ack> ContributeStream::ContributeUnchecked(const std::string& aggregation_id,
                                                              const UpdateView& update) {
  if (closed_) return absl::FailedPreconditionError("the stream is closed");
  absl::Duration backoff = options_.initial_backoff;
  bool may_be_counted = false;  // a send of this update was cut off by a broken stream
  absl::Status last_error;
  int attempt = 1;
  for (;; ++attempt) {
    if (call_ == nullptr) {
      last_error = Connect();
    } else {
      absl::StatusOr<v1::Ack> answer = SendOnce(aggregation_id, update);
      if (answer.ok()) return answer;
      last_error = answer.status();
      if (call_ == nullptr) {  // the stream broke during this send
        may_be_counted = true;
      } else if (may_be_counted && last_error.code() == absl::StatusCode::kAlreadyExists) {
        v1::Ack counted_before;  // the cut-off send was counted (docs/PROTOCOL.md 3.5)
        counted_before.set_aggregation_id(aggregation_id);
        counted_before.set_level(v1::RECEIVED);
        return counted_before;
      } else if (!AsksForResend(last_error) &&
                 !(may_be_counted && last_error.code() == absl::StatusCode::kAborted)) {
        return last_error;
      }
    }
    if (call_ == nullptr && !IsPassingStreamEnd(last_error.code())) return last_error;
    if (attempt >= options_.max_attempts) break;
    absl::SleepFor(backoff);
    backoff *= 2;
  }
  return absl::Status(last_error.code(),
                      absl::StrCat("the update to aggregation '", aggregation_id, "' was not acknowledged after ",
                                   attempt, attempt == 1 ? " attempt" : " attempts", "; the last error: ",
                                   last_error.message()));
}

absl::StatusOr<v1::Ack> ContributeStream::SendOnce(const std::string& aggregation_id,
                                                   const UpdateView& update) {
  if (!WriteUpdate<v1::ContributeRequest>(aggregation_id, /*client_id=*/"", update, chunk_bytes_, options_.ack_level,
                                          [this](const v1::ContributeRequest& r) { return call_->stream->Write(r); })) {
    return FinishBrokenCall();
  }
  return AwaitAnswer();
}

absl::StatusOr<v1::Ack> ContributeStream::SendRaw(const std::vector<v1::ContributeRequest>& requests) {
  if (closed_) return absl::FailedPreconditionError("the stream is closed");
  if (call_ == nullptr) return absl::FailedPreconditionError("the stream broke; SendRaw does not reopen it");
  for (const v1::ContributeRequest& request : requests) {
    if (!call_->stream->Write(request)) break;
  }
  return AwaitAnswer();
}

absl::Status ContributeStream::Close() {
  if (closed_) return absl::OkStatus();
  closed_ = true;
  if (call_ == nullptr) return absl::OkStatus();
  std::unique_ptr<Call> call = std::move(call_);
  call->stream->WritesDone();
  v1::ContributeResponse ignored;
  while (call->stream->Read(&ignored)) {
  }
  return FromGrpcStatus(call->stream->Finish());
}

absl::StatusOr<v1::Ack> SubmitUpdate(std::shared_ptr<grpc::Channel> channel,
                                     const std::string& client_id,
                                     const v1::AggregationSpec& spec, const UpdateView& update,
                                     const CallOptions& options) {
  FEDAGG_ASSIGN_OR_RETURN(const ConvertedUpdate prepared, PrepareLocally(spec, update, options.encoding_seed));
  auto stub = v1::Aggregation::NewStub(channel);
  grpc::ClientContext context;
  PrepareContext(context, options, /*with_deadline=*/true);
  v1::SubmitResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::SubmitRequest>> writer = stub->Submit(&context, &response);
  grpc::ClientWriter<v1::SubmitRequest>* raw_writer = writer.get();
  WriteUpdate<v1::SubmitRequest>(spec.aggregation_id(), client_id, prepared.view(), ContributeStream::kDefaultChunkBytes,
                                 options.ack_level, [raw_writer](const v1::SubmitRequest& r) { return raw_writer->Write(r); });
  writer->WritesDone();
  FEDAGG_RETURN_IF_ERROR(FromGrpcStatus(writer->Finish()));
  return response.ack();
}

ControlClient::ControlClient(std::shared_ptr<grpc::Channel> channel, CallOptions options)
    : control_(v1::Control::NewStub(channel)),
      aggregation_(v1::Aggregation::NewStub(channel)),
      options_(std::move(options)) {}

void ControlClient::Prepare(grpc::ClientContext& context, bool with_deadline) const {
  PrepareContext(context, options_, with_deadline);
}

template <typename Stub, typename Request, typename Response>
absl::StatusOr<Response> ControlClient::Unary(
    Stub& stub, grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
    const Request& request) const {
  grpc::ClientContext context;
  Prepare(context);
  Response response;
  FEDAGG_RETURN_IF_ERROR(FromGrpcStatus((stub.*method)(&context, request, &response)));
  return response;
}

absl::StatusOr<v1::AggregationStatus> ControlClient::Create(const v1::AggregationSpec& spec) {
  v1::CreateAggregationRequest request;
  *request.mutable_spec() = spec;
  return Unary(*control_, &v1::Control::Stub::CreateAggregation, request);
}

absl::StatusOr<v1::AggregationStatus> ControlClient::Get(const std::string& id) {
  v1::GetAggregationRequest request;
  request.set_aggregation_id(id);
  return Unary(*control_, &v1::Control::Stub::GetAggregation, request);
}

absl::StatusOr<std::vector<v1::AggregationStatus>> ControlClient::List() {
  FEDAGG_ASSIGN_OR_RETURN(v1::ListAggregationsResponse response,
                          Unary(*control_, &v1::Control::Stub::ListAggregations, v1::ListAggregationsRequest()));
  return std::vector<v1::AggregationStatus>(response.aggregations().begin(), response.aggregations().end());
}

absl::StatusOr<v1::AggregationStatus> ControlClient::Seal(const std::string& id) {
  v1::SealAggregationRequest request;
  request.set_aggregation_id(id);
  return Unary(*control_, &v1::Control::Stub::SealAggregation, request);
}

absl::StatusOr<v1::AggregationStatus> ControlClient::Cancel(const std::string& id,
                                                            const std::string& reason) {
  v1::CancelAggregationRequest request;
  request.set_aggregation_id(id);
  request.set_reason(reason);
  return Unary(*control_, &v1::Control::Stub::CancelAggregation, request);
}

absl::StatusOr<std::vector<v1::AggregationSpec>> ControlClient::GetTasks(const std::string& client_id,
                                                                         int max) {
  v1::GetTaskRequest request;
  request.set_client_id(client_id);
  request.set_max_tasks(max);
  FEDAGG_ASSIGN_OR_RETURN(v1::GetTaskResponse response,
                          Unary(*aggregation_, &v1::Aggregation::Stub::GetTask, request));
  return std::vector<v1::AggregationSpec>(response.tasks().begin(), response.tasks().end());
}

absl::StatusOr<AggregateResult> ControlClient::GetResult(const std::string& id) {
  grpc::ClientContext context;
  Prepare(context);
  v1::GetResultRequest request;
  request.set_aggregation_id(id);
  std::unique_ptr<grpc::ClientReader<v1::ResultChunk>> reader = control_->GetResult(&context, request);
  AggregateResult result;
  v1::ResultChunk chunk;
  bool header = true;
  // Byte buffers per field for the indices and counts parts.
  std::vector<std::string> indices, counts;
  while (reader->Read(&chunk)) {
    if (header) {
      header = false;
      result.contributions = chunk.status().contributions();
      result.weight_sum = chunk.status().weight_sum();
      if (chunk.status().has_privacy()) result.privacy = PrivacyReportFromProto(chunk.status().privacy());
      for (const auto& field : chunk.fields()) {
        ReportedField reported;
        reported.path = field.path();
        reported.intrinsic = static_cast<Intrinsic>(field.intrinsic());
        reported.has_counts = field.has_counts();
        FEDAGG_ASSIGN_OR_RETURN(reported.value.dtype, DTypeFromProto(field.value().dtype()));
        reported.value.shape.assign(field.value().shape().begin(), field.value().shape().end());
        int64_t elements = 1;
        for (int64_t d : reported.value.shape) elements *= d;
        reported.value.bytes.resize(static_cast<size_t>(elements) * DTypeSize(reported.value.dtype));
        result.fields.push_back(std::move(reported));
      }
      indices.resize(result.fields.size());
      counts.resize(result.fields.size());
      continue;
    }
    if (chunk.field() >= result.fields.size()) return absl::DataLossError("result chunk names an unknown field");
    ReportedField& field = result.fields[chunk.field()];
    if (chunk.part() == v1::ResultChunk::VALUES) {
      if (chunk.offset() + chunk.data().size() > field.value.bytes.size()) {
        return absl::DataLossError("result chunk overruns its field");
      }
      std::memcpy(field.value.bytes.data() + chunk.offset(), chunk.data().data(), chunk.data().size());
    } else {
      std::string& target = chunk.part() == v1::ResultChunk::INDICES ? indices[chunk.field()] : counts[chunk.field()];
      if (chunk.offset() != target.size()) return absl::DataLossError("result chunks out of order");
      target.append(chunk.data());
    }
  }
  FEDAGG_RETURN_IF_ERROR(FromGrpcStatus(reader->Finish()));
  if (header) return absl::DataLossError("empty result stream");
  for (size_t f = 0; f < result.fields.size(); ++f) {
    auto to_int64 = [](const std::string& bytes) {
      std::vector<int64_t> out(bytes.size() / sizeof(int64_t));
      if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(int64_t));
      return out;
    };
    result.fields[f].indices = to_int64(indices[f]);
    result.fields[f].counts = to_int64(counts[f]);
  }
  return result;
}

absl::StatusOr<v1::AggregationStatus> ControlClient::WatchUntilFinal(
    const std::string& id, const std::function<void(const v1::AggregationStatus&)>& on_status) {
  grpc::ClientContext context;
  Prepare(context);
  v1::GetAggregationRequest request;
  request.set_aggregation_id(id);
  std::unique_ptr<grpc::ClientReader<v1::AggregationStatus>> reader =
      control_->WatchAggregation(&context, request);
  v1::AggregationStatus status;
  v1::AggregationStatus last;
  bool any = false;
  while (reader->Read(&status)) {
    any = true;
    last = status;
    if (on_status) on_status(status);
  }
  FEDAGG_RETURN_IF_ERROR(FromGrpcStatus(reader->Finish()));
  if (!any) return absl::DataLossError("the watch ended without a status");
  return last;
}

}  // namespace fedagg
