"""fedagg for Flower (flwr >= 1.41, its Message API): FedAvg whose aggregation runs on a
fedagg tree instead of in the Flower server's memory.

    # server_app.py                                   # client_app.py
    strategy = fedagg.flower.FedaggFedAvg(            @app.train()
        "127.0.0.1:50051",                            def train(msg, context):
        targets=["127.0.0.1:50052", "127.0.0.1:50053"],   arrays = ... train from msg's arrays ...
        row_sparse=["embedding"])                         return fedagg.flower.contribute(msg, arrays, num_examples)
    strategy.start(grid, initial_arrays, num_rounds=3)

Each training round the strategy creates a fedagg aggregation whose type is derived from
the global model's arrays (fedagg.model_layout), names it in the train message's config,
and clients send their trained arrays straight to a fedagg aggregator (`contribute`);
their reply to Flower carries only the number of examples and their metrics. The
strategy then seals the aggregation at the root and reads the weighted mean back: the
Flower server holds the global model once, never the N updates. With
`FedaggFedAvg(..., secure=fedagg.SecureAggregation(), max_clients=N)` the clients mask their
arrays (SecAgg+) and only the fedagg root sees their sum. docs/FRAMEWORKS.md says more.
Needs the `flower` extra: pip install ./client_stub/python[flower].
"""
try:
    import flwr  # noqa: F401
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("fedagg.flower needs Flower: pip install 'fedagg[flower]' "
                      "(or ./client_stub/python[flower] from the repository)") from error

from .client import ERROR_CODE_BASE, contribute
from .config import CONFIG_PREFIX, FedaggRoundConfig
from .strategy import FedaggFedAvg, RoundReport

__all__ = ["CONFIG_PREFIX", "ERROR_CODE_BASE", "FedaggFedAvg", "FedaggRoundConfig", "RoundReport", "contribute"]
