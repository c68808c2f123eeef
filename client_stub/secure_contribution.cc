// Secure contribution: the client's stages over Cohorts.JoinCohort and a ContributeStream.
#include "client_stub/secure_contribution.h"

#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client_stub/encoding_conversion.h"
#include "fedagg/v1/secure_aggregation.grpc.pb.h"
#include "service/core/status_macros.h"
#include "service/core/update_validator.h"
#include "service/rounds/secure_unmasking.h"
#include "service/rounds/spec_conversion.h"
#include "service/secagg/secagg_client.h"

namespace fedagg {
namespace {

// One JoinCohort call: messages each way, and its end. A call left before the protocol's
// end (a refusal, a dropout) is cancelled and finished when it goes out of scope.
class CohortCall {
 public:
  CohortCall(const std::shared_ptr<grpc::Channel>& channel, absl::Duration timeout, const std::string& token)
      : stub_(channel) {
    context_.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    if (!token.empty()) context_.AddMetadata("authorization", absl::StrCat("Bearer ", token));
    stream_ = stub_.JoinCohort(&context_);
  }
  ~CohortCall() {
    if (finished_) return;
    context_.TryCancel();
    v1::CohortResponse ignored;
    while (stream_->Read(&ignored)) {
    }
    (void)stream_->Finish();
  }

  absl::Status Send(const v1::CohortRequest& request) {
    if (stream_->Write(request)) return absl::OkStatus();
    const absl::Status ended = End();
    return absl::Status(ended.code(), absl::StrCat("the cohort stream broke: ", ended.message()));
  }
  // The next response, of `kind`; or the status the node ended the stream with.
  absl::StatusOr<v1::CohortResponse> Expect(v1::CohortResponse::KindCase kind, const char* what) {
    v1::CohortResponse response;
    if (!stream_->Read(&response)) {
      const absl::Status ended = End();
      if (ended.ok()) return absl::DataLossError("the node ended the cohort stream before the protocol's end");
      return ended;
    }
    if (response.kind_case() != kind) {
      return absl::DataLossError(absl::StrCat("the node answered out of turn: ", what, " expected"));
    }
    return response;
  }
  // After the last response: the call's own end.
  absl::Status Close() {
    stream_->WritesDone();
    return End();
  }

 private:
  absl::Status End() {
    finished_ = true;
    const grpc::Status status = stream_->Finish();
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  }

  v1::Cohorts::Stub stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::CohortRequest, v1::CohortResponse>> stream_;
  bool finished_ = false;
};

absl::Status Stopped(const char* where) {
  return absl::CancelledError(absl::StrCat("stopped ", where, ", as told (a dropout)"));
}

}  // namespace

absl::StatusOr<v1::Ack> ContributeSecurely(const std::shared_ptr<grpc::Channel>& channel, ContributeStream& stream,
                                           const v1::AggregationSpec& spec, const std::string& client_id,
                                           const UpdateView& update, const SecureContributionOptions& options) {
  if (!spec.has_secure()) {
    return absl::InvalidArgumentError(
        absl::StrCat("aggregation '", spec.aggregation_id(), "' does not declare secure aggregation"));
  }
  FEDAGG_ASSIGN_OR_RETURN(AggregationConfig config, ConfigFromProto(spec));
  const std::string& root_key = options.pinned_root_key.empty() ? spec.secure().root_public_key()
                                                                : options.pinned_root_key;
  std::optional<ConvertedUpdate> discretized;
  if (!options.update_is_encoded) {
    FEDAGG_ASSIGN_OR_RETURN(discretized, ConvertedUpdate::Of(*config.reduction, update));
  }
  const UpdateView& encoded = discretized.has_value() ? discretized->view() : update;
  FEDAGG_RETURN_IF_ERROR(ValidateUpdate(*config.reduction, encoded));
  const CohortFrame frame = CohortFrameOf(*config.reduction, spec.aggregation_id(), spec.incarnation());
  std::vector<std::vector<uint32_t>> input;
  for (const FieldValue& field : encoded.fields) input.push_back(IntegerWords(field.values, frame.bits));
  FEDAGG_ASSIGN_OR_RETURN(SecAggClient secagg, SecAggClient::Create());

  CohortCall cohort(channel, options.timeout, options.token);

  // Stage 0: advertise, and wait for the roster.
  v1::CohortRequest advertise;
  v1::AdvertiseKeys& keys = *advertise.mutable_advertise();
  keys.set_aggregation_id(spec.aggregation_id());
  keys.set_client_id(client_id);
  keys.set_channel_public_key(BytesOf(secagg.keys().channel_public_key));
  keys.set_mask_public_key(BytesOf(secagg.keys().mask_public_key));
  FEDAGG_RETURN_IF_ERROR(cohort.Send(advertise));
  FEDAGG_ASSIGN_OR_RETURN(v1::CohortResponse roster, cohort.Expect(v1::CohortResponse::kRoster, "the roster"));
  if (roster.roster().root_public_key() != root_key) {
    return absl::PermissionDeniedError(
        "the node handed out a root key other than the root's: its shares would not be sealed to the root");
  }
  absl::StatusOr<SecAggCohort> members = CohortOf(frame, roster.roster());
  if (!members.ok()) return absl::DataLossError(absl::StrCat("the roster: ", members.status().message()));
  const int index = static_cast<int>(roster.roster().index());
  if (members->keys[index].channel_public_key != secagg.keys().channel_public_key ||
      members->keys[index].mask_public_key != secagg.keys().mask_public_key) {
    return absl::DataLossError("the roster does not hold this client's keys at its index");
  }

  // Stage 1: the shares, one sealed to each neighbour.
  if (options.dropout == SecureDropout::kBeforeSharing) return Stopped("before sharing its keys");
  FEDAGG_ASSIGN_OR_RETURN(std::vector<SharedKeys> shares, secagg.ShareKeys(*members, index));
  v1::CohortRequest share;
  for (const SharedKeys& one : shares) {
    v1::SealedShare& out = *share.mutable_shares()->add_shares();
    out.set_peer(static_cast<uint32_t>(one.to));
    out.set_sealed(one.sealed);
  }
  FEDAGG_RETURN_IF_ERROR(cohort.Send(share));

  // Stage 2: the masked update, an ordinary update of b-bit integers.
  FEDAGG_ASSIGN_OR_RETURN(v1::CohortResponse shared,
                          cohort.Expect(v1::CohortResponse::kSharedKeys, "the shares for this client"));
  if (options.dropout == SecureDropout::kBeforeInput) return Stopped("before its masked update");
  std::vector<SharedKeys> received;
  for (const v1::SealedShare& one : shared.shared_keys().shares()) {
    received.push_back(SharedKeys{static_cast<int>(std::min<uint32_t>(one.peer(), 1u << 30)), index, one.sealed()});
  }
  FEDAGG_ASSIGN_OR_RETURN(std::vector<std::vector<uint32_t>> masked, secagg.MaskInput(*members, received, input));
  std::vector<std::vector<std::byte>> bytes(masked.size());
  UpdateView masked_view;
  for (size_t f = 0; f < masked.size(); ++f) {
    bytes[f] = IntegerBytes(masked[f], frame.bits);
    masked_view.fields.push_back(FieldValue{Encoding::kDense, config.reduction->fields()[f].type.dtype, {},
                                            absl::MakeConstSpan(bytes[f])});
  }
  FEDAGG_ASSIGN_OR_RETURN(v1::Ack ack, stream.ContributeUnchecked(spec.aggregation_id(), masked_view));

  // Stage 3: whose update is in the sum; the shares that unmask it, sealed to the root.
  FEDAGG_ASSIGN_OR_RETURN(v1::CohortResponse survivors,
                          cohort.Expect(v1::CohortResponse::kSurvivors, "the survivors"));
  if (options.dropout == SecureDropout::kBeforeUnmasking) return Stopped("before its unmasking shares");
  const auto& flags = survivors.survivors().masked();
  if (flags.size() != members->clients()) return absl::DataLossError("the survivors do not match the roster");
  FEDAGG_ASSIGN_OR_RETURN(UnmaskingShares unmasking, secagg.Unmask(*members, {flags.begin(), flags.end()}));
  v1::CohortRequest reveal;
  reveal.mutable_unmasking()->set_sealed(unmasking.sealed);
  FEDAGG_RETURN_IF_ERROR(cohort.Send(reveal));
  FEDAGG_RETURN_IF_ERROR(cohort.Expect(v1::CohortResponse::kDone, "the end").status());
  FEDAGG_RETURN_IF_ERROR(cohort.Close());
  return ack;
}

}  // namespace fedagg
