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

A round whose aggregation does not finalize (fewer than min_contributions counted, or
cancelled) leaves the global model as it was, as FedAvg does when no client replied; the
reason is logged and kept in `reports[round]`. A fedagg call that fails (the root
unreachable) raises FedaggError with its status code.
"""
import uuid
from dataclasses import dataclass, field
from logging import INFO, WARNING
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedAvg
from flwr.serverapp.strategy.strategy_utils import validate_message_reply_consistency
from flwr.supercore import log

from ..connection import Connection, connect
from ..differential_privacy import DifferentialPrivacy, PrivacyReport
from ..model_layout import ModelLayout, layout_encoding
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
    aggregation_prefix: the prefix of the aggregation ids ("<prefix>-r<round>-<random>").
    Every other keyword argument is FedAvg's.
    """

    def __init__(self, control: Union[str, Connection], targets: Optional[Sequence[str]] = None, *,
                 sparse: Sequence[str] = (), row_sparse: Sequence[str] = (), min_contributions: int = 1,
                 deadline_s: Optional[float] = None, round_timeout_s: float = 600.0,
                 float64_accumulation: bool = False, require_finite: bool = False,
                 deterministic: bool = False, encoding: Union[None, str, ValueEncoding] = "plain",
                 privacy: Optional[DifferentialPrivacy] = None,
                 aggregation_prefix: str = "flower", **fedavg_options: Any) -> None:
        # A bad spelling, a discretized encoding or a quantized deterministic one: refused here, not in round 1.
        self.encoding = layout_encoding(encoding, deterministic)
        if privacy is not None and (self.encoding.encoded or not privacy.expected_clients > 0):
            raise ValueError("FedaggFedAvg(privacy=...): give expected_clients (the clients sampled each round, the "
                             "mean's divisor) and send the arrays plain")
        self.privacy = privacy
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

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        """Creates the round's aggregation, names it in the config, then FedAvg's sampling."""
        if self.fraction_train == 0.0:
            return []
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
        counted = sum(1 for c in contributed if c[REPLY_RECORD].get("counted", False))
        if final.contributions != counted:
            log(WARNING, "aggregate_train: fedagg counted %d contributions to '%s'; %d clients replied that "
                "they contributed", final.contributions, current.config.aggregation_id, counted)
        log(INFO, "aggregate_train: fedagg aggregated %d updates (%g examples) in '%s'", final.contributions,
            report.num_examples, current.config.aggregation_id)
        return ArrayRecord({key: Array(value) for key, value in model.items()}), metrics
