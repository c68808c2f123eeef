"""The Flower client side: `contribute` sends a ClientApp's trained arrays to the fedagg
aggregator its train message names, and returns the reply for Flower, which carries the
number of examples, the client's metrics and where the update went (ConfigRecord
"fedagg": aggregation-id, target, counted) — not the arrays.

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        model.set_weights(msg.content["arrays"].to_numpy_ndarrays())
        loss = model.fit(data)
        return fedagg.flower.contribute(msg, model.get_weights(), len(data), metrics={"loss": loss})

Sparse and row-sparse arrays (those the strategy named) go as the changes from the global
model, computed here from the arrays in `msg`: nothing to do on the client's side. A
refusal (local or from fedagg) becomes an error reply, Error(ERROR_CODE_BASE + the gRPC
status code number, "fedagg refused the update: CODE: message"), which the strategy
counts as a failure; UNAVAILABLE is retried with backoff first, and ALREADY_EXISTS (the
update was counted before, e.g. the message was delivered twice) is a success.

When the round's aggregation is secure (FedaggFedAvg(secure=...): the config carries the
spec with `secure` and the discretization), `contribute` runs this client's whole SecAgg+
part instead (fedagg.contribute_securely, with the node the round assigned it): it clips
its arrays to the clip range, multiplies them by its weight ratio min(num_examples,
max_weight) / max_weight and sends them masked (fedagg.model_layout.SecureDiscretization),
so that no node sees them. It returns once its cohort has finished (a cohort forms among
the round's clients of one aggregator: they must run at the same time). A client with 0
examples still joins, with weight 0, so that its cohort does not wait for it. A stage the
node ended without it (DEADLINE_EXCEEDED), a cohort ended because too few of it shared
(UNAVAILABLE), ALREADY_EXISTS (this client id is in a cohort of the aggregation already)
and every other refusal become error replies as above; nothing is retried (the cohort has
moved on).
"""
import threading
import time
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

import grpc
from flwr.app import ArrayRecord, ConfigRecord, Error, Message, MetricRecord, RecordDict

from ..connection import Connection, connect
from ..errors import FedaggError, invalid_argument
from ..model_layout import ModelLayout
from ..secure_aggregation import contribute_securely
from .config import FedaggRoundConfig

ERROR_CODE_BASE = 1000
REPLY_RECORD = "fedagg"

_connections: Dict[Tuple[str, Tuple[Tuple[str, Any], ...]], Connection] = {}
_connections_lock = threading.Lock()


def _connection(target: str, connect_options: Optional[Mapping[str, Any]]) -> Connection:
    """One connection per aggregator and options in this process, reused across rounds
    (a simulation runs many clients in one worker process)."""
    options = tuple(sorted((connect_options or {}).items()))
    key = (target, options)
    with _connections_lock:
        if key not in _connections:
            _connections[key] = connect(target, **dict(options))
        return _connections[key]


def _as_mapping(arrays: Any, keys: Sequence[str]) -> Mapping[str, Any]:
    if isinstance(arrays, ArrayRecord):
        return {key: array.numpy() for key, array in arrays.items()}
    if isinstance(arrays, Mapping):
        return arrays
    arrays = list(arrays)
    if len(arrays) != len(keys):
        raise invalid_argument(f"{len(arrays)} arrays for a model of {len(keys)}: {list(keys)}")
    return dict(zip(keys, arrays))


def _submit(connection: Connection, client_id: str, spec, fields, weight: float, allow_lossy_cast: bool,
            max_attempts: int, initial_backoff_s: float) -> int:
    backoff = initial_backoff_s
    for attempt in range(1, max_attempts + 1):
        try:
            return connection.submit(client_id, spec, fields, weight, allow_lossy_cast=allow_lossy_cast)
        except FedaggError as error:
            if error.code == grpc.StatusCode.ALREADY_EXISTS:
                return -1  # counted before (a message delivered twice): in the aggregation once
            if error.code != grpc.StatusCode.UNAVAILABLE or error.local or attempt == max_attempts:
                raise
        time.sleep(backoff)
        backoff *= 2
    raise AssertionError("unreachable")


def contribute(msg: Message, arrays: Union[ArrayRecord, Mapping[str, Any], Sequence[Any]],
               num_examples: float, *, metrics: Optional[Mapping[str, Any]] = None,
               client_id: Optional[str] = None, allow_lossy_cast: bool = False,
               connect_options: Optional[Mapping[str, Any]] = None, max_attempts: int = 8,
               initial_backoff_s: float = 0.05, secure_timeout_s: float = 300.0,
               pinned_root_key: Optional[bytes] = None, secure_dropout: Optional[str] = None) -> Message:
    """Sends `arrays` (an ArrayRecord, a dict name -> array, or a list in the model's
    order) with weight `num_examples` to fedagg, and returns the reply to `msg`.

    client_id: the exactly-once key at fedagg (default: "node-<Flower node id>").
    allow_lossy_cast: cast values the model's dtype cannot hold exactly (fedagg.update_input).
    connect_options: keyword arguments of fedagg.connect (token, root_certificates, ...).
    Secure rounds only (see the module comment): secure_timeout_s bounds the whole protocol
    (cohort forming included); pinned_root_key is the root's public key as this client
    learnt it from the root itself (fedagg.contribute_securely); secure_dropout
    ("before_sharing", "before_input", "before_unmasking") stops this client there, as a
    client that drops out would (tests).
    """
    round_config = FedaggRoundConfig.find(msg.content)
    if round_config is None:
        raise invalid_argument("this train message names no fedagg aggregation: is the server's "
                               "strategy fedagg.flower.FedaggFedAvg?")
    node_id = msg.metadata.dst_node_id
    client_id = client_id or f"node-{node_id}"
    target = round_config.target_for(node_id)
    reply_metrics = MetricRecord({**(metrics or {}), round_config.weight_key: num_examples})
    record = ConfigRecord({"aggregation-id": round_config.aggregation_id, "target": target})
    try:
        layout = ModelLayout.from_spec(round_config.spec, round_config.keys, round_config.secure)
        if layout.secure is not None:
            fields, _ = layout.update(_as_mapping(arrays, round_config.keys), num_examples)
            contribute_securely(_connection(target, connect_options), round_config.spec, client_id, fields,
                                timeout=secure_timeout_s, pinned_root_key=pinned_root_key, dropout=secure_dropout)
            record["counted"] = True
            return Message(RecordDict({"metrics": reply_metrics, REPLY_RECORD: record}), reply_to=msg)
        base = None
        if layout.needs_base:
            sent = list(msg.content.array_records.values())
            if len(sent) != 1:
                raise invalid_argument("the train message must carry the global arrays (one ArrayRecord) "
                                       "for the changes the layout sends (sparse arrays, differential privacy)")
            base = _as_mapping(sent[0], round_config.keys)
        if num_examples == 0:
            # Weight 0 adds nothing to FedAvg's weighted mean; fedagg takes positive weights only.
            record["counted"] = False
            return Message(RecordDict({"metrics": reply_metrics, REPLY_RECORD: record}), reply_to=msg)
        fields, weight = layout.update(_as_mapping(arrays, round_config.keys), num_examples, base,
                                       allow_lossy_cast=allow_lossy_cast)
        connection = _connection(target, connect_options)
        _submit(connection, client_id, round_config.spec, fields, weight, allow_lossy_cast, max_attempts,
                initial_backoff_s)
        record["counted"] = True
    except FedaggError as error:
        return Message(Error(ERROR_CODE_BASE + error.code.value[0],
                             f"fedagg refused the update of {client_id} to "
                             f"'{round_config.aggregation_id}' at {target}: {error}"), reply_to=msg)
    return Message(RecordDict({"metrics": reply_metrics, REPLY_RECORD: record}), reply_to=msg)
