"""Differential privacy as an aggregation declares it (docs/SEMANTICS.md, "Differential
privacy"): every update is clipped to an L2 norm of `clip_norm` by the node that receives
it; the root adds discrete Gaussian noise of standard deviation noise_multiplier *
clip_norm to the sum once, when the aggregation finalizes; a mean divides the noised sum by
`expected_clients`. With `adaptive`, the root reports the next round's bound, which
`next_spec_privacy` carries into the next round's spec.

    dp = fedagg.DifferentialPrivacy(clip_norm=0.1, noise_multiplier=1.1, expected_clients=100,
                                    adaptive=fedagg.AdaptiveClipping(target_quantile=0.5))
    control.create("round-1", {"w": fedagg.Field("float32", [10], "federated_mean")}, privacy=dp)
    ...
    dp = dp.after(control.get("round-1").privacy)   # the next round's bound
"""
import dataclasses
from dataclasses import dataclass
from typing import Optional

from .v1 import types_pb2


@dataclass(frozen=True)
class AdaptiveClipping:
    """The bound follows a target quantile of the update norms (TensorFlow Federated's
    defaults); count_stddev 0 means 0.05 * expected_clients."""
    target_quantile: float = 0.5
    learning_rate: float = 0.2
    count_stddev: float = 0.0


@dataclass(frozen=True)
class DifferentialPrivacy:
    clip_norm: float
    noise_multiplier: float
    expected_clients: float = 0.0
    adaptive: Optional[AdaptiveClipping] = None

    def to_proto(self) -> types_pb2.DifferentialPrivacy:
        proto = types_pb2.DifferentialPrivacy(clip_norm=self.clip_norm, noise_multiplier=self.noise_multiplier,
                                              expected_clients=self.expected_clients)
        if self.adaptive is not None:
            proto.adaptive.target_quantile = self.adaptive.target_quantile
            proto.adaptive.learning_rate = self.adaptive.learning_rate
            proto.adaptive.count_stddev = self.adaptive.count_stddev
        return proto

    def after(self, report: "PrivacyReport") -> "DifferentialPrivacy":
        """The next round's privacy: the bound the root reported (adaptive clipping), the
        rest unchanged."""
        if self.adaptive is None or report is None or report.next_clip_norm <= 0:
            return self
        return dataclasses.replace(self, clip_norm=report.next_clip_norm)


@dataclass(frozen=True)
class PrivacyReport:
    """What the root did: the bound, the noise's standard deviation per coordinate of the
    sum, the updates it clipped (exact: for operators, not part of the private release)
    and, with adaptive clipping, the noised unclipped fraction and the next bound."""
    clip_norm: float
    noise_stddev: float
    clipped_updates: int
    unclipped_fraction: float
    next_clip_norm: float

    @classmethod
    def from_status(cls, status: types_pb2.AggregationStatus) -> Optional["PrivacyReport"]:
        if not status.HasField("privacy"):
            return None
        p = status.privacy
        return cls(p.clip_norm, p.noise_stddev, p.clipped_updates, p.unclipped_fraction, p.next_clip_norm)
