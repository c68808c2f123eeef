"""fedagg for NVIDIA FLARE (nvflare >= 2.9): a ModelAggregator that forwards each client
result FLARE hands it to a fedagg aggregator as it arrives and returns fedagg's weighted
mean, so the FLARE server holds one result at a time, never N.

    from nvflare.app_common.workflows.fedavg import FedAvg
    from fedagg.flare import FedaggModelAggregator
    controller = FedAvg(num_clients=8, num_rounds=3,
                        aggregator=FedaggModelAggregator("127.0.0.1:50051", target="127.0.0.1:50052"))

Needs the `flare` extra: pip install ./client_stub/python[flare]. docs/FRAMEWORKS.md says more.
"""
try:
    import nvflare  # noqa: F401
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("fedagg.flare needs NVIDIA FLARE: pip install 'fedagg[flare]' "
                      "(or ./client_stub/python[flare] from the repository)") from error

from .aggregator import FedaggModelAggregator

__all__ = ["FedaggModelAggregator"]
