"""FedaggModelAggregator: NVIDIA FLARE's ModelAggregator interface (what its FedAvg
controller and ScatterAndGather call: reset_stats, accept_model per client result,
aggregate_model) backed by a fedagg aggregation per round.

The first result of a round creates the aggregation, typed from that result's params
(fedagg.model_layout); every result is sent to fedagg at once (Aggregation.Submit, client
id = the FLARE site name) and dropped, weighted as FLARE's FedAvg weighs it: the site's
aggregation weight (aggregation_weights, default 1) times NUM_STEPS_CURRENT_ROUND from the
result's meta (1 when absent or invalid). aggregate_model seals the aggregation, waits for
it to finalize and returns the weighted mean as an FLModel (params in the results' dtypes,
params_type of the results, numeric metrics averaged with the same weights, meta with
nr_aggregated and the aggregation id). A result fedagg refuses is logged and left out, as
FLARE leaves out a result it cannot use; an aggregation that does not finalize raises
FedaggError with the reason.

Sparse and row-sparse arrays (sparse=, row_sparse=) need results that are differences
(params_type DIFF): their weighted mean is then a sum of the entries or rows the sites
changed, divided by the weights.

encoding= ("quantized:8", ...; default "plain") sends the results' dense floating arrays
in that value encoding (fedagg.model_layout): fewer bytes to fedagg, and a mean that
differs from FLARE's, per coordinate, by at most the weighted mean of the results'
quantization levels.

privacy= (a fedagg.DifferentialPrivacy, or its fields as a dict for a FLARE job config:
{"clip_norm": 0.1, "noise_multiplier": 1.1, "expected_clients": 10, "adaptive":
{"target_quantile": 0.5}}) runs DP-FedAvg: results must be differences (params_type DIFF),
every site counts once (no weights), fedagg clips each difference to the clip norm where it
is received and its root noises the sum once and divides it by expected_clients
(docs/SEMANTICS.md section 12); with adaptive clipping each round's spec carries the bound
the previous round's root reported. FLARE's own PercentilePrivacy and SVTPrivacy filters give
no guarantee at the aggregate; this one is accounted with fedagg.privacy_accounting.
"""
import math
import threading
import uuid
from typing import Any, Dict, List, Optional, Sequence, Union

import grpc
import numpy as np
from nvflare.apis.fl_constant import FLMetaKey
from nvflare.app_common.abstract.fl_model import FLModel, ParamsType
from nvflare.app_common.aggregators.model_aggregator import ModelAggregator
from nvflare.app_common.app_constant import AppConstants

from ..connection import Connection, connect
from ..differential_privacy import AdaptiveClipping, DifferentialPrivacy
from ..errors import FedaggError
from ..model_layout import ModelLayout, layout_encoding
from ..value_encoding import ValueEncoding


def result_weight(model: FLModel, aggregation_weights: Dict[str, float]) -> float:
    """The weight FLARE's FedAvg gives a result: site weight x NUM_STEPS_CURRENT_ROUND."""
    meta = model.meta or {}
    site = meta.get("client_name", AppConstants.CLIENT_UNKNOWN)
    steps = meta.get(FLMetaKey.NUM_STEPS_CURRENT_ROUND)
    try:
        steps = 1.0 if steps is None or isinstance(steps, bool) else float(steps)
    except (TypeError, ValueError, OverflowError):
        steps = 1.0
    if not math.isfinite(steps) or steps <= 0:
        steps = 1.0
    return float(aggregation_weights.get(site, 1.0)) * steps


def _privacy(privacy: Union[None, DifferentialPrivacy, Dict[str, Any]]) -> Optional[DifferentialPrivacy]:
    """A DifferentialPrivacy from itself or from a job config's dict."""
    if privacy is None or isinstance(privacy, DifferentialPrivacy):
        return privacy
    fields = dict(privacy)
    adaptive = fields.pop("adaptive", None)
    return DifferentialPrivacy(**fields, adaptive=None if adaptive is None else AdaptiveClipping(**adaptive))


class _Zeros:
    """The base of DIFF results: changes are from zero."""

    def __init__(self, layout: ModelLayout):
        self._fields = {f.key: f for f in layout.fields}

    def __getitem__(self, key: str) -> np.ndarray:
        f = self._fields[key]
        return np.zeros(f.shape, f.dtype)


class FedaggModelAggregator(ModelAggregator):
    """control: the root aggregator ("host:port"); target: where results are sent (an
    intermediate; default the root); min_contributions: each round's quorum;
    aggregation_weights: per-site weights as FLARE's FedAvg takes them; connect_options:
    keyword arguments of fedagg.connect (token, TLS); encoding: the value encoding of the
    results' dense floating arrays, a spelling ("plain", the default; "quantized:8";
    "quantized:4/512") or a fedagg.ValueEncoding — a string, so a FLARE job config can set
    it ("args": {"encoding": "quantized:8"}); each coordinate of the mean is then within
    the weighted mean of the results' levels 2 s / (2^b - 1) of FLARE's (sparse, row-sparse
    and integer arrays stay plain; discretized encodings, and quantized ones with
    deterministic=True, are refused here, INVALID_ARGUMENT);
    the rest as fedagg.flower's strategy."""

    def __init__(self, control: str, target: Optional[str] = None, *, sparse: Sequence[str] = (),
                 row_sparse: Sequence[str] = (), min_contributions: int = 1,
                 aggregation_weights: Optional[Dict[str, float]] = None, round_timeout_s: float = 600.0,
                 float64_accumulation: bool = False, require_finite: bool = False,
                 deterministic: bool = False, aggregation_prefix: str = "flare",
                 connect_options: Optional[Dict[str, Any]] = None, allow_lossy_cast: bool = False,
                 encoding: Union[None, str, ValueEncoding] = "plain",
                 privacy: Union[None, DifferentialPrivacy, Dict[str, Any]] = None):
        super().__init__()
        self.control_address, self.target = control, target or control
        self.sparse, self.row_sparse = list(sparse), list(row_sparse)
        self.min_contributions = min_contributions
        self.aggregation_weights = dict(aggregation_weights or {})
        self.round_timeout_s = round_timeout_s
        self.float64_accumulation, self.require_finite = float64_accumulation, require_finite
        self.deterministic = deterministic
        # A bad spelling, a discretized encoding or a quantized deterministic one fails when the job is configured.
        self.encoding = layout_encoding(encoding, deterministic)
        self.privacy = _privacy(privacy)
        if self.privacy is not None and (self.encoding.encoded or not self.privacy.expected_clients > 0):
            raise ValueError("FedaggModelAggregator(privacy=...): give expected_clients (the sites each round, the "
                             "mean's divisor) and send the arrays plain")
        self.aggregation_prefix = aggregation_prefix
        self.connect_options = dict(connect_options or {})
        self.allow_lossy_cast = allow_lossy_cast
        self._lock = threading.Lock()
        self._control: Optional[Connection] = None
        self._sender: Optional[Connection] = None
        self.failures: List[str] = []
        self._start_round()

    def _start_round(self):
        self._aggregation_id: Optional[str] = None
        self._spec = None
        self._layout: Optional[ModelLayout] = None
        self._params_type = None
        self._metric_sums: Dict[str, float] = {}
        self._metric_weight = 0.0
        self._round = None

    def _connections(self):
        if self._control is None:
            self._control = connect(self.control_address, **self.connect_options)
            self._sender = (self._control if self.target == self.control_address
                            else connect(self.target, **self.connect_options))
        return self._control, self._sender

    def _log(self, level: str, message: str):
        if self.fl_ctx is not None:
            getattr(self, level)(message)

    def reset_stats(self):
        with self._lock:
            if self._aggregation_id is not None:
                try:
                    self._connections()[0].control.cancel(self._aggregation_id, "FLARE reset the round")
                except FedaggError:
                    pass  # already final: nothing to release
            self._start_round()

    def _create(self, model: FLModel, params: Dict[str, Any]):
        layout = ModelLayout.from_arrays(params, sparse=self.sparse, row_sparse=self.row_sparse,
                                         encoding=self.encoding, private=self.privacy is not None)
        if layout.needs_base and model.params_type != ParamsType.DIFF:
            raise FedaggError(grpc.StatusCode.INVALID_ARGUMENT, "sparse and row-sparse arrays, and differential "
                              f"privacy, need results that are differences (params_type DIFF), got {model.params_type}",
                              local=True)
        self._round = model.current_round
        aggregation_id = f"{self.aggregation_prefix}-r{self._round}-{uuid.uuid4().hex[:12]}"
        status = self._connections()[0].control.create(layout.spec(
            aggregation_id, min_contributions=self.min_contributions, require_finite=self.require_finite,
            float64_accumulation=self.float64_accumulation, deterministic=self.deterministic, privacy=self.privacy))
        self._aggregation_id, self._spec, self._layout = aggregation_id, status.spec, layout
        self._params_type = model.params_type

    def accept_model(self, model: FLModel):
        site = (model.meta or {}).get("client_name", AppConstants.CLIENT_UNKNOWN)
        params = {key: np.asarray(value) for key, value in (model.params or {}).items()}
        weight = result_weight(model, self.aggregation_weights)
        with self._lock:
            try:
                if self._aggregation_id is None:
                    self._create(model, params)
                base = _Zeros(self._layout) if self._layout.needs_base else None
                fields, sent_weight = self._layout.update(params, weight, base, allow_lossy_cast=self.allow_lossy_cast)
                weight = 1.0 if sent_weight is None else sent_weight  # a private round: every site counts once
                self._connections()[1].submit(str(site), self._spec, fields, sent_weight,
                                              allow_lossy_cast=self.allow_lossy_cast)
            except FedaggError as error:
                self.failures.append(f"{site}: {error}")
                self._log("error", f"fedagg refused the result of {site}: {error}")
                return
            for key, value in (model.metrics or {}).items():
                if isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
                    self._metric_sums[key] = self._metric_sums.get(key, 0.0) + weight * float(value)
            self._metric_weight += weight

    def aggregate_model(self) -> FLModel:
        with self._lock:
            if self._aggregation_id is None:
                raise FedaggError(grpc.StatusCode.FAILED_PRECONDITION,
                                  "no result reached fedagg this round: " + "; ".join(self.failures[-3:]))
            aggregation_id, layout = self._aggregation_id, self._layout
            control = self._connections()[0].control
            control.seal(aggregation_id)
            final = control.wait(aggregation_id, timeout=self.round_timeout_s)
            if final.state != "FINALIZED":
                self._start_round()
                raise FedaggError(grpc.StatusCode.FAILED_PRECONDITION,
                                  f"fedagg aggregation '{aggregation_id}' ended {final.state}: {final.detail}")
            if self.privacy is not None and final.privacy is not None:
                self.privacy = self.privacy.after(final.privacy)  # adaptive clipping's next bound
            result = control.result(aggregation_id)
            params = layout.model_from_result(result, _Zeros(layout) if layout.needs_base else None)
            metrics = ({k: v / self._metric_weight for k, v in self._metric_sums.items()}
                       if self._metric_weight else None)
            model = FLModel(params=params, params_type=self._params_type, metrics=metrics or None,
                            current_round=self._round,
                            meta={"nr_aggregated": final.contributions, "fedagg_aggregation_id": aggregation_id,
                                  **({"fedagg_noise_stddev": final.privacy.noise_stddev,
                                      "fedagg_clipped_updates": final.privacy.clipped_updates}
                                     if final.privacy is not None else {})})
            self._log("info", f"fedagg aggregated {final.contributions} results in '{aggregation_id}'")
            self._start_round()
            return model
