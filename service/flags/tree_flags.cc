// fedagg-server's tree flags: its parent (none at the root), how it talks to it, how long
// it waits for its children, and the root's checkpoints.
#include "absl/flags/flag.h"
#include "absl/time/time.h"
#include "service/flags/flag_values.h"
#include "service/flags/server_flags.h"
#include "service/core/status_macros.h"

ABSL_FLAG(std::string, parent, "", "host:port of the parent aggregator; empty: this is the root");
ABSL_FLAG(std::string, node_id, "",
          "this node's name at its parent (default: listen address#port); the parent sees "
          "<node_id>@<start time>, so a restarted node is a new child");
ABSL_FLAG(int64_t, child_grace_ms, 10000,
          "after a seal, how long this node waits for its child aggregators' final partials "
          "(give each tier a longer grace than the tiers below it)");
ABSL_FLAG(int64_t, forward_interval_ms, 1000,
          "intermediate aggregators: how often partial aggregates are forwarded up");
ABSL_FLAG(int64_t, parent_keepalive_ms, 10000,
          "intermediate aggregators: ping the parent after this long without traffic and drop "
          "the connection when a ping is not answered within this long again (at least 1000); "
          "the node then refuses updates with UNAVAILABLE until it has rejoined");
ABSL_FLAG(int64_t, child_keepalive_ms, 10000,
          "ping the connections of this node's streams (its children's, its clients') after this "
          "long without traffic and drop one whose ping is not answered within this long again "
          "(at least 1000): a child cut off by the network is noticed, and --child_grace_ms "
          "later given up as lost, the client ids it had not delivered released");
ABSL_FLAG(std::string, parent_tls_ca, "", "PEM CA that verifies the parent (enables TLS to it)");
ABSL_FLAG(std::string, parent_tls_cert, "", "PEM client certificate for the parent (mTLS)");
ABSL_FLAG(std::string, parent_tls_key, "", "PEM private key for --parent_tls_cert");
ABSL_FLAG(std::string, parent_token_file, "", "file holding the bearer token for the parent");
ABSL_FLAG(std::string, child_partial_dtype, "float32",
          "what this node asks its children's partials in: float32 (full precision), or float16 / bfloat16 "
          "(dense floating sums in 16 bits, half the bytes between aggregators; docs/SEMANTICS.md section 11)");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "root only: directory for one checkpoint file per aggregation, resumed after a restart; "
          "enables DURABLE acks (empty: no checkpoints)");
ABSL_FLAG(absl::Duration, checkpoint_interval, absl::Seconds(1),
          "how often aggregations that changed are checkpointed (e.g. 500ms, 2s); a DURABLE ack "
          "waits up to this long");

namespace fedagg {

absl::Status ApplyTreeFlags(ServerConfig& config) {
  config.parent_address = absl::GetFlag(FLAGS_parent);
  config.node_id = absl::GetFlag(FLAGS_node_id);
  config.child_grace = absl::Milliseconds(absl::GetFlag(FLAGS_child_grace_ms));
  config.forward_interval = absl::Milliseconds(absl::GetFlag(FLAGS_forward_interval_ms));
  config.parent_keepalive = absl::Milliseconds(absl::GetFlag(FLAGS_parent_keepalive_ms));
  config.child_keepalive = absl::Milliseconds(absl::GetFlag(FLAGS_child_keepalive_ms));
  config.parent_tls = {absl::GetFlag(FLAGS_parent_tls_cert), absl::GetFlag(FLAGS_parent_tls_key),
                       absl::GetFlag(FLAGS_parent_tls_ca)};
  FEDAGG_ASSIGN_OR_RETURN(const std::vector<std::string> parent_token,
                          ReadTokenFile(absl::GetFlag(FLAGS_parent_token_file)));
  if (!parent_token.empty()) config.parent_token = parent_token.front();
  FEDAGG_ASSIGN_OR_RETURN(config.child_partial_precision,
                          ParsePartialPrecision(absl::GetFlag(FLAGS_child_partial_dtype)));
  config.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  config.checkpoint_interval = absl::GetFlag(FLAGS_checkpoint_interval);
  return absl::OkStatus();
}

}  // namespace fedagg
