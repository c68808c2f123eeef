"""What a fedagg round tells Flower clients, in the train message's ConfigRecord: the
aggregation to contribute to, its spec, the model's array names in order, the fedagg
aggregators clients may send to, and the metric that carries the weight. Written by
FedaggFedAvg.configure_train, read by fedagg.flower.contribute.
"""
from dataclasses import dataclass
from typing import List, Optional

from flwr.app import ConfigRecord, RecordDict

from ..errors import invalid_argument
from ..spec import Spec
from ..v1 import types_pb2

CONFIG_PREFIX = "fedagg."
_ID, _SPEC, _KEYS, _TARGETS, _WEIGHT_KEY = (CONFIG_PREFIX + k for k in
                                            ("aggregation-id", "spec", "keys", "targets", "weight-key"))


@dataclass
class FedaggRoundConfig:
    aggregation_id: str
    spec: Spec
    keys: List[str]
    targets: List[str]
    weight_key: str

    def write(self, config: ConfigRecord) -> None:
        config[_ID] = self.aggregation_id
        config[_SPEC] = self.spec.proto.SerializeToString()
        config[_KEYS] = list(self.keys)
        config[_TARGETS] = list(self.targets)
        config[_WEIGHT_KEY] = self.weight_key

    def target_for(self, node_id: int) -> str:
        """The aggregator a node sends to: nodes are spread over the targets by id."""
        return self.targets[node_id % len(self.targets)]

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
                return cls(str(config[_ID]), Spec(spec), [str(k) for k in config[_KEYS]], targets,
                           str(config[_WEIGHT_KEY]))
        return None
