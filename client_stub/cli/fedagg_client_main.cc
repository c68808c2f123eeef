// fedagg-client: the operator's command line for a fedagg server.
//   fedagg-client [--server=HOST:PORT] [--token_file=F] [--json] COMMAND [ARGS]
// Commands: create, status, list, submit, seal, cancel, result, watch (--help for all).
// Tensors are read from and written to NumPy .npy files, or one .npz archive (numpy.savez)
// for every field. Exit codes: 0 success,
// 1 the server refused or could not be reached (its status code and message are printed),
// 2 a usage or local input error.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <google/protobuf/util/json_util.h>

#include "service/core/abseil_deadlock_detection.h"
#include "service/core/program_usage.h"
#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/ascii.h"
#include "absl/time/clock.h"
#include "client_stub/client.h"
#include "client_stub/secure_contribution.h"
#include "client_stub/dtype_cast.h"
#include "client_stub/encoding_conversion.h"
#include "client_stub/npy_file.h"
#include "client_stub/npz_file.h"
#include "service/core/intrinsic.h"
#include "service/core/status_macros.h"
#include "service/rounds/spec_conversion.h"
#include "service/core/read_file.h"

ABSL_FLAG(std::string, server, "localhost:50051", "the fedagg server (host:port)");
ABSL_FLAG(std::string, token_file, "", "file holding a bearer token for the server");
ABSL_FLAG(bool, json, false, "print machine-readable JSON instead of text");
ABSL_FLAG(std::string, type, "", "create: the value type, e.g. '<w=float32[10,5],b=float32[5]>'");
ABSL_FLAG(std::string, intrinsics, "",
          "create: one intrinsic per leaf field, comma-separated, e.g. federated_mean,sparse_sum+counts; "
          "+clip=C gives a field its own L2 bound under --privacy (federated_mean+clip=0.5)");
ABSL_FLAG(std::string, encoding, "",
          "create: the value encoding of every linear field (all but federated_max/min) that names none in "
          "--intrinsics (quantized:BITS[/BLOCK], discretized:BITS@SCALE; a field's own: INTRINSIC@ENCODING); "
          "submit encodes such fields itself");
ABSL_FLAG(uint64_t, encoding_seed, 0,
          "submit: the seed of encoded fields' stochastic rounding (0: a random one; fix it only to "
          "reproduce the bytes)");
ABSL_FLAG(int64_t, min_contributions, 1, "create: the quorum");
ABSL_FLAG(int64_t, max_contributions, 0, "create: the most contributions accepted (0: unlimited)");
ABSL_FLAG(int64_t, deadline_s, 0, "create: seconds from now to the deadline (0: none)");
ABSL_FLAG(bool, require_finite, false, "create: refuse NaN and Inf values");
ABSL_FLAG(bool, float64, false, "create: accumulate float32/16 inputs in float64");
ABSL_FLAG(bool, deterministic, false,
          "create: sum floating-point fields exactly, so results are the same to the bit for any "
          "order of updates and any tree of aggregators (refuses NaN and Inf in them)");
ABSL_FLAG(std::string, privacy, "",
          "create: differential privacy, 'clip=C,z=Z,clients=E' (every update clipped to L2 norm C, noise "
          "z*C once at the root, a mean divided by E), adaptive with ',quantile=Q[,lr=L][,count_stddev=S]' "
          "(docs/SEMANTICS.md section 12)");
ABSL_FLAG(std::string, secure, "",
          "create: a secure aggregation, 'on' or 'cohort=N[,min=M,degree=D,threshold=T,timeout_ms=X]' or with the graph derived per cohort 'cohort=N,adversarial=A,dropout=P' (every field "
          "a discretized sum or mean of one bit width; docs/SEMANTICS.md section 13); submit to one runs its "
          "protocol and waits for its cohort");
ABSL_FLAG(std::string, client_id, "", "submit: this client's id (its exactly-once key)");
ABSL_FLAG(std::string, wait, "received",
          "submit: the ack to wait for: received (counted in the server's memory) or durable (in "
          "the server's checkpoint on disk; needs a server with --checkpoint_dir)");
ABSL_FLAG(bool, allow_lossy_cast, false,
          "submit: cast values to the declared dtype even when that loses precision or range "
          "(float64 to float32, int64 to float64, ...); exact casts happen without it");
ABSL_FLAG(double, weight, 0, "submit: the update's weight (weighted aggregations; > 0)");
ABSL_FLAG(std::string, reason, "", "cancel: why");
ABSL_FLAG(std::string, out, "", "result: directory (created if missing) to write FIELD.npy (and FIELD.indices.npy, FIELD.counts.npy), or FILE.npz to write one archive");

namespace fedagg {
namespace {

constexpr int kOk = 0;
constexpr int kServerError = 1;
constexpr int kUsageError = 2;

int Fail(int code, const absl::Status& status) {
  if (absl::GetFlag(FLAGS_json)) {
    std::printf("{\"error\": {\"code\": \"%s\", \"message\": \"%s\"}}\n",
                absl::StatusCodeToString(status.code()).c_str(), std::string(status.message()).c_str());
  } else {
    std::fprintf(stderr, "fedagg-client: %s\n", status.ToString().c_str());
  }
  return code;
}

void PrintStatus(const v1::AggregationStatus& status) {
  if (absl::GetFlag(FLAGS_json)) {
    std::string json;
    google::protobuf::util::JsonPrintOptions options;
    options.preserve_proto_field_names = true;
    (void)google::protobuf::util::MessageToJsonString(status, &json, options);
    std::printf("%s\n", json.c_str());
    return;
  }
  absl::StatusOr<ValueType> type = ValueTypeFromProto(status.spec().value_type());
  std::printf("%s  %s  contributions=%lld (quorum %lld)  children=%lld  type=%s%s%s\n",
              status.spec().aggregation_id().c_str(), v1::AggregationState_Name(status.state()).c_str(),
              static_cast<long long>(status.contributions()),
              static_cast<long long>(status.spec().min_contributions()),
              static_cast<long long>(status.children()), type.ok() ? type->ToString().c_str() : "?",
              status.detail().empty() ? "" : "  detail=", status.detail().c_str());
  if (status.has_privacy()) {
    const v1::PrivacyReport& privacy = status.privacy();
    std::printf("  privacy: clip_norm=%g noise_stddev=%g clipped_updates=%lld", privacy.clip_norm(),
                privacy.noise_stddev(), static_cast<long long>(privacy.clipped_updates()));
    if (privacy.next_clip_norm() > 0) {
      std::printf(" unclipped_fraction=%g next_clip_norm=%g", privacy.unclipped_fraction(), privacy.next_clip_norm());
    }
    std::printf("\n");
  }
}

absl::StatusOr<v1::AggregationSpec> SpecFromFlags(const std::string& id) {
  v1::AggregationSpec spec;
  spec.set_aggregation_id(id);
  absl::StatusOr<ValueType> type = ParseValueType(absl::GetFlag(FLAGS_type));
  if (!type.ok()) return type.status();
  *spec.mutable_value_type() = ValueTypeToProto(*type);
  absl::StatusOr<std::vector<v1::FieldIntrinsic>> intrinsics = ParseIntrinsicList(absl::GetFlag(FLAGS_intrinsics));
  if (!intrinsics.ok()) return intrinsics.status();
  FEDAGG_RETURN_IF_ERROR(ApplyEncodingToLinearFields(absl::GetFlag(FLAGS_encoding), *intrinsics));
  for (const v1::FieldIntrinsic& field : *intrinsics) *spec.add_intrinsics() = field;
  spec.set_min_contributions(absl::GetFlag(FLAGS_min_contributions));
  spec.set_max_contributions(absl::GetFlag(FLAGS_max_contributions));
  if (absl::GetFlag(FLAGS_deadline_s) > 0) {
    spec.set_deadline_unix_ms(absl::ToUnixMillis(absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_deadline_s))));
  }
  spec.set_require_finite(absl::GetFlag(FLAGS_require_finite));
  spec.set_float64_accumulation(absl::GetFlag(FLAGS_float64));
  spec.set_deterministic(absl::GetFlag(FLAGS_deterministic));
  FEDAGG_ASSIGN_OR_RETURN(std::optional<v1::DifferentialPrivacy> privacy, ParsePrivacy(absl::GetFlag(FLAGS_privacy)));
  if (privacy.has_value()) *spec.mutable_privacy() = *privacy;
  FEDAGG_ASSIGN_OR_RETURN(std::optional<v1::SecureAggregation> secure, ParseSecureAggregation(absl::GetFlag(FLAGS_secure)));
  if (secure.has_value()) *spec.mutable_secure() = *secure;
  return spec;
}

// One field of an update from `inputs`, in its declared encoding and dtype: FIELD is a
// dense value; FIELD.indices with FIELD.values a pair in the field's own sparse encoding
// (sparse COO for a dense field); FIELD.row_ids with FIELD.rows a row-sparse pair.
absl::StatusOr<EncodedField> LoadField(const FieldSpec& field, const std::map<std::string, Tensor>& inputs) {
  auto given = [&](const std::string& suffix) -> const Tensor* {
    auto it = inputs.find(field.path + suffix);
    return it == inputs.end() ? nullptr : &it->second;
  };
  struct Form {
    const char* index_suffix;  // nullptr for dense
    const char* value_suffix;
    Encoding encoding;
  };
  const Encoding pair_encoding = field.encoding == Encoding::kDense ? Encoding::kSparse : field.encoding;
  const Form forms[] = {{nullptr, "", Encoding::kDense},
                        {".indices", ".values", pair_encoding},
                        {".row_ids", ".rows", Encoding::kRowSparse}};
  const Form* chosen = nullptr;
  for (const Form& form : forms) {
    if (given(form.value_suffix) == nullptr && (form.index_suffix == nullptr || given(form.index_suffix) == nullptr)) {
      continue;
    }
    if (chosen != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("field '", field.path, "' is given both as ", field.path,
                                                     chosen->value_suffix, " and as ", field.path, form.value_suffix,
                                                     "; give one"));
    }
    chosen = &form;
  }
  const std::string usage = absl::StrCat("field '", field.path, "' (", IntrinsicName(field.intrinsic), ") needs ",
                                         field.path, "=FILE.npy, or ", field.path, ".indices=I.npy with ", field.path,
                                         ".values=V.npy, or ", field.path, ".row_ids=R.npy with ", field.path,
                                         ".rows=V.npy (or members of those names in a FILE.npz)");
  if (chosen == nullptr) return absl::InvalidArgumentError(usage);
  const Tensor* values = given(chosen->value_suffix);
  const Tensor* indices = chosen->index_suffix == nullptr ? nullptr : given(chosen->index_suffix);
  if (values == nullptr || (chosen->index_suffix != nullptr && indices == nullptr)) {
    return absl::InvalidArgumentError(usage);
  }
  FieldValue input{chosen->encoding, values->dtype, {}, absl::MakeConstSpan(values->bytes)};
  if (indices != nullptr) {
    if (indices->dtype != DType::kInt64) {
      return absl::InvalidArgumentError(absl::StrCat(field.path, chosen->index_suffix, " must be int64"));
    }
    input.indices = indices->values<int64_t>();
  }
  FEDAGG_ASSIGN_OR_RETURN(EncodedField encoded, ToDeclaredEncoding(field, input));
  FEDAGG_ASSIGN_OR_RETURN(
      encoded.values,
      CastToDeclared(encoded.values, field.type.dtype,
                     absl::GetFlag(FLAGS_allow_lossy_cast) ? CastPolicy::kAllowLossy : CastPolicy::kExactOnly,
                     absl::StrCat("field '", field.path, "' values (", field.path, chosen->value_suffix, ")")));
  return encoded;
}

// submit: one update for `spec`, each field from the files (or .npz members) named
// FIELD (dense), FIELD.indices and FIELD.values (the field's own sparse encoding; sparse
// COO for a dense field) or FIELD.row_ids and FIELD.rows (row-sparse, for any field of
// rank ≥ 1). Whatever is given is sent in the field's declared encoding
// (encoding_conversion.h) and dtype (dtype_cast.h), as the Python client does.
int Submit(std::shared_ptr<grpc::Channel> channel, const CallOptions& call, const v1::AggregationSpec& spec,
           const std::vector<std::string>& files) {
  std::map<std::string, Tensor> inputs;  // by name: FIELD, FIELD.indices, ... (files and .npz members)
  for (const std::string& arg : files) {
    const size_t eq = arg.find('=');
    if (eq == std::string::npos && absl::EndsWith(arg, ".npz")) {
      absl::StatusOr<std::map<std::string, Tensor>> members = ReadNpz(arg);
      if (!members.ok()) return Fail(kUsageError, members.status());
      inputs.merge(*members);
      continue;
    }
    if (eq == std::string::npos) return Fail(kUsageError, absl::InvalidArgumentError(absl::StrCat(
                                                 "'", arg, "' is not FIELD=FILE.npy or FILE.npz")));
    absl::StatusOr<Tensor> tensor = ReadNpy(arg.substr(eq + 1));
    if (!tensor.ok()) return Fail(kUsageError, tensor.status());
    inputs[arg.substr(0, eq)] = *std::move(tensor);
  }
  absl::StatusOr<AggregationConfig> config = ConfigFromProto(spec);
  if (!config.ok()) return Fail(kServerError, config.status());
  std::set<std::string> names;  // every name an input may have: FIELD and its pairs' members
  for (const FieldSpec& field : config->reduction->fields()) {
    for (const char* suffix : {"", ".indices", ".values", ".row_ids", ".rows"}) names.insert(field.path + suffix);
  }
  for (const auto& [name, tensor] : inputs) {
    if (!names.contains(name)) {
      return Fail(kUsageError, absl::InvalidArgumentError(absl::StrCat(
                                   "'", name, "' names no field of aggregation '", spec.aggregation_id(), "' (",
                                   config->reduction->value_type().ToString(), "): give FIELD, FIELD.indices and "
                                   "FIELD.values, or FIELD.row_ids and FIELD.rows")));
    }
  }
  std::vector<EncodedField> encoded;  // keeps the bytes the update's views point into
  encoded.reserve(config->reduction->fields().size());
  UpdateView update;
  for (const FieldSpec& field : config->reduction->fields()) {
    absl::StatusOr<EncodedField> value = LoadField(field, inputs);
    if (!value.ok()) return Fail(kUsageError, value.status());
    encoded.push_back(*std::move(value));
    update.fields.push_back(encoded.back().view());
  }
  if (absl::GetFlag(FLAGS_weight) != 0) update.weight = absl::GetFlag(FLAGS_weight);
  const std::string client_id = absl::GetFlag(FLAGS_client_id);
  if (client_id.empty()) return Fail(kUsageError, absl::InvalidArgumentError("submit needs --client_id"));
  const std::string wait = absl::GetFlag(FLAGS_wait);
  if (wait != "received" && wait != "durable") {
    return Fail(kUsageError, absl::InvalidArgumentError(absl::StrCat("--wait must be received or durable, not '", wait, "'")));
  }
  CallOptions submit_call = call;
  submit_call.ack_level = wait == "durable" ? v1::DURABLE : v1::RECEIVED;
  if (absl::GetFlag(FLAGS_encoding_seed) != 0) submit_call.encoding_seed = absl::GetFlag(FLAGS_encoding_seed);
  absl::StatusOr<std::unique_ptr<ContributeStream>> stream = ContributeStream::Open(channel, client_id, submit_call);
  if (!stream.ok()) return Fail(kServerError, stream.status());
  SecureContributionOptions secure;
  secure.token = call.token;
  absl::StatusOr<v1::Ack> ack = spec.has_secure() ? ContributeSecurely(channel, **stream, spec, client_id, update, secure)
                                                  : (*stream)->Contribute(spec, update);
  if (!ack.ok()) {
    // Local validation errors are the caller's input; server refusals are the server's.
    return Fail(kServerError, ack.status());
  }
  const std::string level = ack->level() == v1::DURABLE ? "durable" : "received";
  if (absl::GetFlag(FLAGS_json)) {
    std::printf("{\"aggregation_id\": \"%s\", \"contributions\": %lld, \"level\": \"%s\"}\n",
                ack->aggregation_id().c_str(), static_cast<long long>(ack->contributions()), level.c_str());
  } else {
    std::printf("accepted by %s (%s): %lld contributions counted there\n", ack->aggregation_id().c_str(),
                level.c_str(), static_cast<long long>(ack->contributions()));
  }
  if (submit_call.ack_level == v1::DURABLE && ack->level() != v1::DURABLE) {
    return Fail(kServerError, absl::UnavailableError(
                                  "the server counted the update in memory but stopped before a checkpoint "
                                  "held it; submit it again with the same --client_id once it is back"));
  }
  return kOk;
}

// The arrays a field's result is written as: FIELD, FIELD.indices (sparse_sum_sparse,
// also when it has no entry) and FIELD.counts (when the spec asked for counts).
struct ResultArray {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;
  size_t bytes;
};

// The counts in the shape the Python package gives them: one per entry of the indices
// (sparse_sum_sparse), per row (row-sparse), or per coordinate in the field's shape.
std::vector<int64_t> CountsShape(const ReportedField& field) {
  if (field.has_indices()) return {static_cast<int64_t>(field.counts.size())};
  if (EncodingOf(field.intrinsic) == Encoding::kRowSparse) return {field.value.shape.at(0)};
  return field.value.shape;
}

std::vector<ResultArray> ArraysOf(const ReportedField& field) {
  std::vector<ResultArray> arrays = {
      {field.path, field.value.dtype, field.value.shape, field.value.bytes.data(), field.value.bytes.size()}};
  auto add_int64 = [&](const char* suffix, std::vector<int64_t> shape, const std::vector<int64_t>& values) {
    arrays.push_back({field.path + suffix, DType::kInt64, std::move(shape), values.data(),
                      values.size() * sizeof(int64_t)});
  };
  if (field.has_indices()) add_int64(".indices", {static_cast<int64_t>(field.indices.size())}, field.indices);
  if (field.has_counts) add_int64(".counts", CountsShape(field), field.counts);
  return arrays;
}

// result --out=FILE.npz: one archive, members FIELD, FIELD.indices, FIELD.counts.
int WriteResultNpz(const AggregateResult& result, const std::string& path) {
  std::vector<std::pair<std::string, std::string>> members;
  for (const ReportedField& field : result.fields) {
    for (const ResultArray& array : ArraysOf(field)) {
      absl::StatusOr<std::string> npy = EncodeNpy(array.dtype, array.shape, array.data, array.bytes);
      if (!npy.ok()) return Fail(kUsageError, npy.status());
      members.emplace_back(array.name, *std::move(npy));
    }
  }
  absl::Status written = WriteNpz(path, members);
  if (!written.ok()) return Fail(kUsageError, written);
  if (absl::GetFlag(FLAGS_json)) {
    std::printf("{\"contributions\": %lld, \"weight_sum\": %g, \"file\": \"%s\", \"members\": %zu}\n",
                static_cast<long long>(result.contributions), result.weight_sum, path.c_str(), members.size());
  } else {
    std::printf("%zu arrays -> %s\n%lld contributions\n", members.size(), path.c_str(),
                static_cast<long long>(result.contributions));
  }
  return kOk;
}

int WriteResult(const AggregateResult& result, const std::string& dir) {
  if (dir.empty()) return Fail(kUsageError, absl::InvalidArgumentError("result needs --out=DIRECTORY or --out=FILE.npz"));
  if (absl::EndsWith(dir, ".npz")) return WriteResultNpz(result, dir);
  std::error_code created;
  std::filesystem::create_directories(dir, created);
  if (created) {
    return Fail(kUsageError, absl::FailedPreconditionError(absl::StrCat(
                                 "cannot create the --out directory '", dir, "': ", created.message())));
  }
  std::string json = absl::StrCat("{\"contributions\": ", result.contributions, ", \"weight_sum\": ",
                                  result.weight_sum, ", \"fields\": [");
  for (size_t f = 0; f < result.fields.size(); ++f) {
    const ReportedField& field = result.fields[f];
    for (const ResultArray& array : ArraysOf(field)) {
      absl::Status written = WriteNpy(absl::StrCat(dir, "/", array.name, ".npy"), array.dtype, array.shape,
                                      array.data, array.bytes);
      if (!written.ok()) return Fail(kUsageError, written);
    }
    const std::string base = absl::StrCat(dir, "/", field.path);
    absl::StrAppend(&json, f ? ", " : "", "{\"path\": \"", field.path, "\", \"file\": \"", base, ".npy\"",
                    field.has_indices() ? ", \"indices\": true" : "", field.has_counts ? ", \"counts\": true" : "",
                    "}");
    if (!absl::GetFlag(FLAGS_json)) {
      std::printf("%s -> %s.npy%s%s\n", field.path.c_str(), base.c_str(),
                  field.has_indices() ? " (+ .indices.npy)" : "", field.has_counts ? " (+ .counts.npy)" : "");
    }
  }
  if (absl::GetFlag(FLAGS_json)) std::printf("%s]}\n", json.c_str());
  else std::printf("%lld contributions\n", static_cast<long long>(result.contributions));
  return kOk;
}

int Run(const std::vector<std::string>& args) {
  if (args.empty()) {
    return Fail(kUsageError, absl::InvalidArgumentError(
                                 "name a command: create, status, list, submit, seal, cancel, result, watch"));
  }
  CallOptions call;
  if (!absl::GetFlag(FLAGS_token_file).empty()) {
    absl::StatusOr<std::string> token = ReadFile(absl::GetFlag(FLAGS_token_file));
    if (!token.ok()) return Fail(kUsageError, token.status());
    call.token = std::string(absl::StripAsciiWhitespace(*token));
  }
  auto channel = ConnectToFedagg(absl::GetFlag(FLAGS_server), grpc::InsecureChannelCredentials());
  ControlClient control(channel, call);
  const std::string& command = args[0];
  auto need_id = [&]() -> absl::StatusOr<std::string> {
    if (args.size() < 2) return absl::InvalidArgumentError(absl::StrCat(command, " needs an aggregation id"));
    return args[1];
  };
  if (command == "list") {
    absl::StatusOr<std::vector<v1::AggregationStatus>> all = control.List();
    if (!all.ok()) return Fail(kServerError, all.status());
    for (const v1::AggregationStatus& status : *all) PrintStatus(status);
    return kOk;
  }
  absl::StatusOr<std::string> id = need_id();
  if (!id.ok()) return Fail(kUsageError, id.status());
  absl::StatusOr<v1::AggregationStatus> status;
  if (command == "create") {
    absl::StatusOr<v1::AggregationSpec> spec = SpecFromFlags(*id);
    if (!spec.ok()) return Fail(kUsageError, spec.status());
    status = control.Create(*spec);
  } else if (command == "status") {
    status = control.Get(*id);
  } else if (command == "seal") {
    status = control.Seal(*id);
  } else if (command == "cancel") {
    status = control.Cancel(*id, absl::GetFlag(FLAGS_reason));
  } else if (command == "watch") {
    status = control.WatchUntilFinal(*id, [](const v1::AggregationStatus& s) { PrintStatus(s); });
    return status.ok() ? kOk : Fail(kServerError, status.status());
  } else if (command == "submit") {
    status = control.Get(*id);
    if (!status.ok()) return Fail(kServerError, status.status());
    return Submit(channel, call, status->spec(), std::vector<std::string>(args.begin() + 2, args.end()));
  } else if (command == "result") {
    absl::StatusOr<AggregateResult> result = control.GetResult(*id);
    if (!result.ok()) return Fail(kServerError, result.status());
    return WriteResult(*result, absl::GetFlag(FLAGS_out));
  } else {
    return Fail(kUsageError, absl::InvalidArgumentError(absl::StrCat("unknown command '", command, "'")));
  }
  if (!status.ok()) return Fail(kServerError, status.status());
  PrintStatus(*status);
  return kOk;
}

}  // namespace
}  // namespace fedagg

int main(int argc, char** argv) {
  fedagg::TurnOffAbseilDeadlockDetection();
  fedagg::SetProgramUsage(
      "fedagg's command line: aggregations, updates and results on a running tree.\n"
      "  fedagg-client [--server=HOST:PORT] [--json] COMMAND ...\n"
      "  create ID --type='<w=float32[4]>' --intrinsics=federated_mean [--encoding=quantized:8] [--min_contributions=N] [--privacy=clip=1,z=1.1,clients=100] [--secure=cohort=8]\n"
      "  status ID | list | seal ID | cancel ID [--reason=...] | watch ID\n"
      "  submit ID --client_id=C [--weight=W] [--wait=received|durable] [--allow_lossy_cast] [--encoding_seed=S] FIELD=FILE.npy | FIELD.indices=I.npy FIELD.values=V.npy | FIELD.row_ids=R.npy FIELD.rows=V.npy | FILE.npz ...\n"
      "                             (any of the three forms for any field: sent in the encoding and dtype the field declares;\n"
      "                              FILE.npz from numpy.savez: members named as the files)\n"
      "  result ID --out=DIR        (writes DIR/FIELD.npy, FIELD.indices.npy, FIELD.counts.npy)\n"
      "  result ID --out=FILE.npz   (one archive, members FIELD, FIELD.indices, FIELD.counts)\n"
      "Exit codes: 0 success, 1 refused by or unreachable server, 2 usage or local input error.");
  std::vector<char*> positional = fedagg::ParseProgramCommandLine(argc, argv);
  std::vector<std::string> args(positional.begin() + 1, positional.end());
  return fedagg::Run(args);
}
