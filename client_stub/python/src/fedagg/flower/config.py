"""What a fedagg round tells Flower clients, in the train message's ConfigRecord: the
aggregation to contribute to, its spec, the model's array names in order, the fedagg
aggregators clients may send to, and the metric that carries the weight; for a secure
aggregation also how the clients discretize (clip range, max weight, max clients) and
which aggregator each sampled node sends to (a cohort forms among the clients of one
aggregator). Written by FedaggFedAvg.configure_train, read by fedagg.flower.contribute.
"""
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from flwr.app import ConfigRecord, RecordDict

from ..errors import invalid_argument
from ..model_layout import SecureDiscretization
from ..spec import Spec
from ..v1 import types_pb2

CONFIG_PREFIX = "fedagg."
_ID, _SPEC, _KEYS, _TARGETS, _WEIGHT_KEY = (CONFIG_PREFIX + k for k in
                                            ("aggregation-id", "spec", "keys", "targets", "weight-key"))
_CLIP_RANGE, _MAX_WEIGHT, _MAX_CLIENTS = (CONFIG_PREFIX + k for k in
                                          ("secure-clip-range", "secure-max-weight", "secure-max-clients"))
# Node ids are unsigned 64-bit numbers, which a ConfigRecord's (signed) integers cannot all
# hold: they travel as decimal strings, beside the index of each node's target.
_NODES, _NODE_TARGETS = CONFIG_PREFIX + "nodes", CONFIG_PREFIX + "node-targets"


@dataclass
class FedaggRoundConfig:
    aggregation_id: str
    spec: Spec
    keys: List[str]
    targets: List[str]
    weight_key: str
    secure: Optional[SecureDiscretization] = None
    node_targets: Dict[int, int] = field(default_factory=dict)  # node id -> index in targets

    def write(self, config: ConfigRecord) -> None:
        config[_ID] = self.aggregation_id
        config[_SPEC] = self.spec.proto.SerializeToString()
        config[_KEYS] = list(self.keys)
        config[_TARGETS] = list(self.targets)
        config[_WEIGHT_KEY] = self.weight_key
        for key in (_CLIP_RANGE, _MAX_WEIGHT, _MAX_CLIENTS, _NODES, _NODE_TARGETS):
            if key in config:  # the config record may be reused round after round
                del config[key]
        if self.secure is not None:
            config[_CLIP_RANGE] = float(self.secure.clip_range)
            config[_MAX_WEIGHT] = float(self.secure.max_weight)
            config[_MAX_CLIENTS] = int(self.secure.max_clients)
        if self.node_targets:
            config[_NODES] = [str(node) for node in self.node_targets]
            config[_NODE_TARGETS] = [int(index) for index in self.node_targets.values()]

    def target_for(self, node_id: int) -> str:
        """The aggregator a node sends to: the one the round assigned it (secure rounds), or
        nodes spread over the targets by id."""
        index = self.node_targets.get(int(node_id))
        return self.targets[index] if index is not None else self.targets[node_id % len(self.targets)]

    @classmethod
    def find(cls, content: RecordDict) -> Optional["FedaggRoundConfig"]:
        """The round's fedagg config in a train message, or None when it has none."""
        for config in content.config_records.values():
            if _ID in config:
                spec = types_pb2.AggregationSpec()
                spec.ParseFromString(config[_SPEC])
                targets = list(config[_TARGETS])
                if not targets:
                    raise invalid_argument("the train message names no fedagg aggregator to send to")
                secure = None
                if spec.HasField("secure"):
                    if _CLIP_RANGE not in config:
                        raise invalid_argument("the train message's aggregation is secure but its config carries no "
                                               "clip range and max weight")
                    bits = {i.encoding.bits for i in spec.intrinsics}
                    if len(bits) != 1:
                        raise invalid_argument("a secure aggregation's fields are discretized to one bit width")
                    try:
                        secure = SecureDiscretization(bits.pop(), float(config[_CLIP_RANGE]),
                                                      float(config[_MAX_WEIGHT]), int(config[_MAX_CLIENTS]))
                    except ValueError as error:
                        raise invalid_argument(f"the round's secure discretization: {error}") from None
                node_targets = {}
                if _NODES in config:
                    nodes, indices = list(config[_NODES]), list(config[_NODE_TARGETS])
                    if len(nodes) != len(indices) or any(not 0 <= int(i) < len(targets) for i in indices):
                        raise invalid_argument("the train message's node targets do not match its targets")
                    node_targets = {int(node): int(index) for node, index in zip(nodes, indices)}
                return cls(str(config[_ID]), Spec(spec), [str(k) for k in config[_KEYS]], targets,
                           str(config[_WEIGHT_KEY]), secure, node_targets)
        return None
