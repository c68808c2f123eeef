"""FedaggFedAvg: Flower's FedAvg (flwr.serverapp.strategy.FedAvg, the Message API) with the
weighted mean of the clients' arrays computed by a fedagg tree.

configure_train creates one fedagg aggregation per round, typed from the global arrays
(fedagg.model_layout: one weighted-mean field per array in its own dtype, sparse_sum /
row_sparse_sum for the arrays named sparse / row_sparse, and num_examples; with
`encoding=`, the dense floating arrays declare that value encoding), and writes its
id, spec and the aggregators to send to into the train config (fedagg.flower.config).
Clients send their arrays there with fedagg.flower.contribute and reply to Flower with
metrics only. aggregate_train checks the replies as FedAvg does (without an ArrayRecord),
seals the aggregation at the root, waits for it to finalize and turns its result into the
new global ArrayRecord. Train metrics are FedAvg's (weighted by the same key); sampling,
evaluation and everything else is FedAvg's own code.

With `privacy` (a fedagg.DifferentialPrivacy), each round is DP-FedAvg: clients send their
changes from the global arrays, every client counts once (no num_examples weight), fedagg
clips each change to the clip norm where it is received, and the root adds Gaussian noise
(a discrete Gaussian, docs/SEMANTICS.md section 12) once to the sum and divides it by
`expected_clients`; the new model is the global one plus that noised mean. With adaptive
clipping, each round's spec carries the bound the previous round's root reported. This is
what Flower's DifferentialPrivacyServerSideFixedClipping (and its adaptive sibling) does
around FedAvg, in the aggregation tier instead of the Flower server: replace
`DifferentialPrivacyServerSideFixedClipping(FedAvg(...), noise_multiplier=z,
clipping_norm=C, num_sampled_clients=n)` with `FedaggFedAvg(root, ...,
privacy=fedagg.DifferentialPrivacy(clip_norm=C, noise_multiplier=z, expected_clients=n))`.
The privacy spent over the rounds: fedagg.privacy_accounting.

With `secure` (a fedagg.SecureAggregation: cohort sizes, degree, threshold, stage timeout)
each round is a secure aggregation (SecAgg+, docs/SEMANTICS.md section 13): clients mask
their updates so that no fedagg node below the root, and not the Flower server, sees one;
the root unmasks only the sum. The nodes add masked integers, so there is no weighted mean:
as Flower's SecAggPlusWorkflow does for FedAvg, each client sends its arrays multiplied by
its weight ratio and the weight itself, and the strategy divides the sum by the summed
weight. Precisely (fedagg.model_layout.SecureDiscretization): a client with n examples
clips each array to [-clip_range, clip_range], multiplies it by r = n' / max_weight, where
n' = min(n, max_weight) (integer n are exact; others are rounded to the weight field's
step, a power of two at most 1), and sends it as a federated_sum discretized to
`secure_bits` bits in steps of c = clip_range / L, L = floor((2^(secure_bits-1) - 1) /
max_clients) - 1, and n' as another (its step a power of two at most 1). The new model is
max_weight * sum(r x) / sum(n'): FedAvg's weighted mean of the clipped arrays with weights
n', to within

    n * c * max_weight / sum(n')        (n: the clients counted)

on every coordinate (each client's stochastic rounding is within one step, and unbiased),
then rounded to the array's dtype. With every client at max_weight that is c (about
8 / (2^31 / max_clients) at the defaults: 3.7e-7 for 100 clients). The steps are chosen so that no sum
of max_clients clients leaves the signed secure_bits-bit range the root reads it in (a
larger one would wrap unseen), and the aggregation takes at most max_clients updates
(max_contributions): parameters that could overflow are refused with ValueError when the
strategy is made. Every array is sent dense and must be floating (sparse and row_sparse
names, integer and boolean arrays, `encoding` and `privacy` are refused). A cohort forms
among the clients of one aggregator, so each round deals its sampled nodes to as many
targets as give every one at least min_cohort clients, in groups of one size (the largest
number of targets, at most len(targets), that divides the sample), and declares that size
as max_cohort unless `secure` gives one: each cohort forms as soon as its clients have all
advertised (their ClientApps must run at the same time: Flower's simulation engine runs
at most min(its Ray workers, CPU count + 4) at once; docs/FRAMEWORKS.md). A round that
samples more than max_clients nodes trains the first max_clients of them; one that samples
fewer than min_cohort trains none (the report says so). Clients that drop out are the protocol's
business: a round whose cohorts kept enough shares is the mean of the updates in the sum;
one that did not ends FAILED and leaves the model unchanged, the reason in `reports`.
To adopt it in place of Flower's SecAggPlusWorkflow (clipping_range, max_weight,
modulus_range 2^32): `FedaggFedAvg(root, targets, secure=fedagg.SecureAggregation(),
clip_range=8.0, max_weight=1000.0, secure_bits=32, max_clients=N)`, with no workflow and
no secaggplus_mod on the clients; `fedagg.flower.contribute` runs the client's part.

A round whose aggregation does not finalize (fewer than min_contributions counted, or
cancelled) leaves the global model as it was, as FedAvg does when no client replied; the
reason is logged and kept in `reports[round]`. A fedagg call that fails (the root
unreachable) raises FedaggError with its status code.
"""
import dataclasses
import uuid
from dataclasses import dataclass, field
from logging import INFO, WARNING
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedAvg
from flwr.serverapp.strategy.strategy_utils import validate_message_reply_consistency
from flwr.supercore import log

from ..connection import Connection, connect
from ..differential_privacy import DifferentialPrivacy, PrivacyReport
from ..model_layout import ModelLayout, SecureDiscretization, layout_encoding
from ..spec import SecureAggregation
from ..value_encoding import ValueEncoding
from .client import REPLY_RECORD
from .config import FedaggRoundConfig


@dataclass
class RoundReport:
    """What one training round's aggregation did."""
    aggregation_id: str
    state: str = "OPEN"
    detail: str = ""
    contributions: int = 0
    num_examples: float = 0.0
    replies: int = 0
    failures: List[str] = field(default_factory=list)
    privacy: Optional[PrivacyReport] = None  # differential privacy: what the root did
    # Secure aggregation: how far each coordinate of the new model may be from the weighted
    # mean of the clipped arrays (n c max_weight / sum of n'; see the module comment).
    error_bound: Optional[float] = None


@dataclass
class _Round:
    config: FedaggRoundConfig
    layout: ModelLayout
    base: Optional[ArrayRecord]


class FedaggFedAvg(FedAvg):
    """FedAvg aggregating through fedagg.

    control: the root aggregator ("host:port") or a fedagg Connection to it.
    targets: the aggregators clients send to (intermediates of the tree); node n sends to
      targets[n % len(targets)]. Default: the root.
    sparse / row_sparse: names of arrays sent as COO entries / rows that changed.
    min_contributions: the quorum of each round's aggregation (default 1: like FedAvg,
      a round with any successful client produces a model).
    deadline_s: a deadline for each round's aggregation, from its creation (fedagg seals
      it then, whatever Flower does).
    round_timeout_s: how long aggregate_train waits for the sealed aggregation to finalize.
    float64_accumulation, require_finite, deterministic: the aggregation's options
      (fedagg.build_spec; deterministic: the same model to the bit, whatever the order in
      which clients report and the tree of aggregators).
    encoding: the value encoding of the model's dense floating arrays (their
      federated_weighted_mean fields), a spelling such as "quantized:8" or
      "quantized:4/512", or a fedagg.ValueEncoding; default "plain". Clients then send b
      bits a coordinate (plus a float32 scale per block), stochastically rounded: each
      coordinate of the new model is within the weighted mean of the clients' levels
      2 s / (2^b - 1) of FedAvg's and equal to it in expectation (fedagg.model_layout,
      docs/FRAMEWORKS.md). Sparse, row-sparse and integer arrays stay plain. Discretized
      encodings are refused (INVALID_ARGUMENT, here), and so is a quantized one with
      deterministic=True.
    privacy: differential privacy (fedagg.DifferentialPrivacy with expected_clients, the
      clients sampled each round); see the module comment. Arrays then travel plain.
    secure: secure aggregation (a fedagg.SecureAggregation: min_cohort, max_cohort, degree,
      threshold, stage_timeout_ms; 0 takes fedagg's defaults); see the module comment. With
      it: secure_bits (8, 16 or 32; default 32) the width of the masked sums, clip_range
      (default 8.0) the bound each value is clipped to, max_weight (default 1000.0) the
      num_examples a client counts with at most, max_clients (required) the most clients
      one round sums. ValueError when they could overflow, saying what to change.
    aggregation_prefix: the prefix of the aggregation ids ("<prefix>-r<round>-<random>").
    Every other keyword argument is FedAvg's.
    """

    def __init__(self, control: Union[str, Connection], targets: Optional[Sequence[str]] = None, *,
                 sparse: Sequence[str] = (), row_sparse: Sequence[str] = (), min_contributions: int = 1,
                 deadline_s: Optional[float] = None, round_timeout_s: float = 600.0,
                 float64_accumulation: bool = False, require_finite: bool = False,
                 deterministic: bool = False, encoding: Union[None, str, ValueEncoding] = "plain",
                 privacy: Optional[DifferentialPrivacy] = None,
                 secure: Optional[SecureAggregation] = None, secure_bits: int = 32, clip_range: float = 8.0,
                 max_weight: float = 1000.0, max_clients: Optional[int] = None,
                 aggregation_prefix: str = "flower", **fedavg_options: Any) -> None:
        # A bad spelling, a discretized encoding or a quantized deterministic one: refused here, not in round 1.
        self.encoding = layout_encoding(encoding, deterministic)
        if privacy is not None and (self.encoding.encoded or not privacy.expected_clients > 0):
            raise ValueError("FedaggFedAvg(privacy=...): give expected_clients (the clients sampled each round, the "
                             "mean's divisor) and send the arrays plain")
        self.privacy = privacy
        self.secure = secure
        self.secure_discretization: Optional[SecureDiscretization] = None
        if secure is not None:
            self.secure_discretization = _check_secure(secure, secure_bits, clip_range, max_weight, max_clients,
                                                       privacy, self.encoding, sparse, row_sparse,
                                                       min_contributions)
        super().__init__(**fedavg_options)
        self.connection = connect(control) if isinstance(control, str) else control
        self.root = control if isinstance(control, str) else "a fedagg connection"
        self.targets = list(targets) if targets else ([control] if isinstance(control, str) else [])
        if not self.targets:
            raise ValueError("FedaggFedAvg: name the aggregators clients send to (targets)")
        self.sparse, self.row_sparse = list(sparse), list(row_sparse)
        self.min_contributions = min_contributions
        self.deadline_s = deadline_s
        self.round_timeout_s = round_timeout_s
        self.float64_accumulation = float64_accumulation
        self.require_finite = require_finite
        self.deterministic = deterministic
        self.aggregation_prefix = aggregation_prefix
        self.reports: Dict[int, RoundReport] = {}
        self._rounds: Dict[int, _Round] = {}

    def summary(self) -> None:
        super().summary()
        log(INFO, "\t└──> fedagg: root %s, clients send to %s", self.root, ", ".join(self.targets))
        if self.encoding.encoded:
            log(INFO, "\t└──> fedagg: dense floating arrays sent %s", self.encoding)
        if self.secure_discretization is not None:
            log(INFO, "\t└──> fedagg: secure aggregation, %s", self.secure_discretization.describe())

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        """Creates the round's aggregation, names it in the config, then FedAvg's sampling."""
        if self.fraction_train == 0.0:
            return []
        if self.secure_discretization is not None:
            return self._configure_secure_train(server_round, arrays, config, grid)
        layout = ModelLayout.from_arrays({key: array.numpy() for key, array in arrays.items()},
                                         sparse=self.sparse, row_sparse=self.row_sparse,
                                         encoding=self.encoding, private=self.privacy is not None)
        aggregation_id = f"{self.aggregation_prefix}-r{server_round}-{uuid.uuid4().hex[:12]}"
        status = self.connection.control.create(layout.spec(
            aggregation_id, min_contributions=self.min_contributions, deadline_s=self.deadline_s,
            float64_accumulation=self.float64_accumulation, require_finite=self.require_finite,
            deterministic=self.deterministic, privacy=self.privacy))
        round_config = FedaggRoundConfig(aggregation_id, status.spec, layout.keys, self.targets,
                                         self.weighted_by_key)
        round_config.write(config)
        self._rounds[server_round] = _Round(round_config, layout, arrays if layout.needs_base else None)
        self.reports[server_round] = RoundReport(aggregation_id)
        messages = list(super().configure_train(server_round, arrays, config, grid))
        if not messages:
            self.connection.control.cancel(aggregation_id, "no client was sampled")
            self._rounds.pop(server_round)
        return messages

    def _configure_secure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                                grid: Grid) -> List[Message]:
        """A secure round: FedAvg's sampling first, then the aggregation, whose cohort size
        follows from the sample, and the node -> aggregator assignment in the config."""
        discretization = self.secure_discretization
        # Integer and boolean arrays are refused here, before any node is sampled.
        layout = ModelLayout.from_arrays({key: array.numpy() for key, array in arrays.items()},
                                         secure=discretization)
        sampled = list(super().configure_train(server_round, arrays, config, grid))
        nodes = [message.metadata.dst_node_id for message in sampled]
        if len(nodes) > discretization.max_clients:
            log(WARNING, "configure_train: %d nodes sampled; a secure round sums at most max_clients=%d, so the "
                "first %d train", len(nodes), discretization.max_clients, discretization.max_clients)
            nodes = nodes[:discretization.max_clients]
        min_cohort = self.secure.min_cohort or _DEFAULT_MIN_COHORT
        if len(nodes) < min_cohort:
            detail = (f"{len(nodes)} nodes sampled, fewer than a secure cohort's min_cohort ({min_cohort}): no "
                      "training this round")
            log(WARNING, "configure_train: %s", detail)
            self.reports[server_round] = RoundReport("", state="CANCELLED", detail=detail)
            return []
        node_targets, group = _deal(sorted(nodes), len(self.targets), min_cohort, server_round)
        cohort = self.secure if self.secure.max_cohort else dataclasses.replace(self.secure, max_cohort=group)
        aggregation_id = f"{self.aggregation_prefix}-r{server_round}-{uuid.uuid4().hex[:12]}"
        status = self.connection.control.create(layout.spec(
            aggregation_id, min_contributions=self.min_contributions,
            max_contributions=discretization.max_clients, deadline_s=self.deadline_s,
            float64_accumulation=self.float64_accumulation, require_finite=self.require_finite,
            deterministic=self.deterministic, secure=cohort))
        round_config = FedaggRoundConfig(aggregation_id, status.spec, layout.keys, self.targets,
                                         self.weighted_by_key, discretization, node_targets)
        round_config.write(config)
        self._rounds[server_round] = _Round(round_config, layout, None)
        self.reports[server_round] = RoundReport(aggregation_id)
        log(INFO, "configure_train: secure aggregation '%s': %d nodes in cohorts of %d at %d aggregators",
            aggregation_id, len(nodes), group, len(set(node_targets.values())))
        record = RecordDict({self.arrayrecord_key: arrays, self.configrecord_key: config})
        return list(self._construct_messages(record, nodes, MessageType.TRAIN))

    def aggregate_train(self, server_round: int,
                        replies: Iterable[Message]) -> Tuple[Optional[ArrayRecord], Optional[MetricRecord]]:
        """Seals the round's aggregation and returns its result as the new global arrays."""
        current = self._rounds.pop(server_round, None)
        if current is None:
            return None, None
        report = self.reports[server_round]
        valid, errors = self._check_and_log_replies(list(replies), is_train=True, validate=False)
        report.failures = [f"node {m.metadata.src_node_id}: {m.error.reason}" for m in errors]
        contributed = []
        for message in valid:
            record = message.content.config_records.get(REPLY_RECORD)
            if record is None or record.get("aggregation-id") != current.config.aggregation_id:
                report.failures.append(f"node {message.metadata.src_node_id}: its reply names no contribution "
                                       f"to '{current.config.aggregation_id}' (is its ClientApp using "
                                       "fedagg.flower.contribute?)")
                continue
            contributed.append(message.content)
        report.replies = len(contributed)
        metrics = None
        if contributed:
            validate_message_reply_consistency(contributed, self.weighted_by_key, check_arrayrecord=False)
            metrics = self.train_metrics_aggr_fn(contributed, self.weighted_by_key)

        control = self.connection.control
        control.seal(current.config.aggregation_id)
        final = control.wait(current.config.aggregation_id, timeout=self.round_timeout_s)
        report.state, report.detail, report.contributions = final.state, final.detail, final.contributions
        report.privacy = final.privacy
        if self.privacy is not None and final.privacy is not None:
            self.privacy = self.privacy.after(final.privacy)  # adaptive clipping's next bound
        if final.state != "FINALIZED":
            log(WARNING, "aggregate_train: fedagg aggregation '%s' ended %s (%s); the global model is unchanged",
                current.config.aggregation_id, final.state, final.detail)
            return None, metrics
        result = control.result(current.config.aggregation_id)
        base = None if current.base is None else {k: a.numpy() for k, a in current.base.items()}
        model = current.layout.model_from_result(result, base)
        if not current.layout.private:  # a private round weighs every client the same
            report.num_examples = float(result["num_examples"].values)
        if current.layout.secure is not None:
            report.error_bound = current.layout.secure.value_error_bound(final.contributions, report.num_examples)
        counted = sum(1 for c in contributed if c[REPLY_RECORD].get("counted", False))
        if final.contributions != counted:
            log(WARNING, "aggregate_train: fedagg counted %d contributions to '%s'; %d clients replied that "
                "they contributed", final.contributions, current.config.aggregation_id, counted)
        log(INFO, "aggregate_train: fedagg aggregated %d updates (%g examples) in '%s'", final.contributions,
            report.num_examples, current.config.aggregation_id)
        return ArrayRecord({key: Array(value) for key, value in model.items()}), metrics


_DEFAULT_MIN_COHORT = 3  # fedagg's default min_cohort (SecureAggregation's 0)


def _check_secure(secure: SecureAggregation, bits: int, clip_range: float, max_weight: float,
                  max_clients: Optional[int], privacy: Optional[DifferentialPrivacy], encoding: ValueEncoding,
                  sparse: Sequence[str], row_sparse: Sequence[str], min_contributions: int) -> SecureDiscretization:
    """FedaggFedAvg's secure parameters, or ValueError saying what to change."""
    if not isinstance(secure, SecureAggregation):
        raise ValueError(f"FedaggFedAvg(secure=...) takes a fedagg.SecureAggregation, not {type(secure).__name__}")
    if privacy is not None:
        raise ValueError("FedaggFedAvg: secure aggregation with differential privacy is not built (a node cannot "
                         "clip a masked update); give secure= or privacy=, not both")
    if encoding.encoded:
        raise ValueError(f"FedaggFedAvg(secure=...): a secure round discretizes the arrays itself (secure_bits, "
                         f"clip_range, max_weight); leave encoding plain, not {encoding}")
    if sparse or row_sparse:
        raise ValueError("FedaggFedAvg(secure=...): a secure aggregation masks dense vectors (a sparse update's "
                         "indices would show which rows a client touched), so every array is sent dense; leave "
                         f"sparse and row_sparse empty (got {sorted(set(sparse) | set(row_sparse))})")
    if max_clients is None:
        raise ValueError("FedaggFedAvg(secure=...): give max_clients, the most clients one round sums (the sampled "
                         "nodes, at most): the discretization's step is chosen so that their sum cannot overflow "
                         "secure_bits")
    discretization = SecureDiscretization(bits, clip_range, max_weight, max_clients)
    min_cohort = secure.min_cohort or _DEFAULT_MIN_COHORT
    if max_clients < min_cohort:
        raise ValueError(f"FedaggFedAvg(secure=...): max_clients={max_clients} is below min_cohort={min_cohort}, "
                         "the fewest clients a cohort forms with")
    if min_contributions > max_clients:
        raise ValueError(f"FedaggFedAvg(secure=...): min_contributions={min_contributions} exceeds "
                         f"max_clients={max_clients}")
    return discretization


def _deal(nodes: List[int], targets: int, min_cohort: int, server_round: int) -> Tuple[Dict[int, int], int]:
    """The sampled nodes dealt to the targets in groups of one size, each at least
    min_cohort: as many groups as the targets and min_cohort allow that divide the sample
    (one cohort forms at each aggregator as soon as its group has advertised). The groups
    take the targets from round-robin position `server_round` on. Returns node -> target
    index, and the group size."""
    n = len(nodes)
    groups = max(1, min(targets, n // min_cohort))
    while n % groups:
        groups -= 1
    size = n // groups
    return {node: (i // size + server_round) % targets for i, node in enumerate(nodes)}, size
