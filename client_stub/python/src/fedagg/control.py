"""ControlClient: the server placement's operations on aggregations (fedagg.v1.Control):
create from a Python description of the value type, get, list, seal, cancel, watch until
a final state, and fetch the result as NumPy arrays. Every failure raises FedaggError
with the server's status code.
"""
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple

import grpc

from .errors import FedaggError
from .result import Result, read_result
from .spec import AggregationStatus, build_spec
from .v1 import control_pb2, control_pb2_grpc, types_pb2


def call(method: Callable, request: Any, metadata, timeout: Optional[float]):
    """One unary (or client-streaming) call; gRPC errors become FedaggError."""
    try:
        return method(request, metadata=metadata, timeout=timeout)
    except grpc.RpcError as error:
        raise FedaggError.from_rpc_error(error) from None


class ControlClient:
    def __init__(self, channel: grpc.Channel, metadata: Tuple[Tuple[str, str], ...], timeout: float):
        self._stub = control_pb2_grpc.ControlStub(channel)
        self._metadata = metadata
        self._timeout = timeout

    def _unary(self, method: Callable, request: Any) -> AggregationStatus:
        return AggregationStatus.from_proto(call(method, request, self._metadata, self._timeout))

    def create(self, aggregation_id_or_spec: Any, value_type: Any = None, **options) -> AggregationStatus:
        """create("round-1", {"w": Field("float32", [3], "federated_mean")}, min_contributions=2)
        (options as fedagg.build_spec takes them), or create(spec_proto)."""
        if isinstance(aggregation_id_or_spec, types_pb2.AggregationSpec):
            spec = aggregation_id_or_spec
        else:
            spec = build_spec(aggregation_id_or_spec, value_type, **options)
        return self._unary(self._stub.CreateAggregation, control_pb2.CreateAggregationRequest(spec=spec))

    def get(self, aggregation_id: str) -> AggregationStatus:
        return self._unary(self._stub.GetAggregation,
                           control_pb2.GetAggregationRequest(aggregation_id=aggregation_id))

    def list(self) -> List[AggregationStatus]:
        response = call(self._stub.ListAggregations, control_pb2.ListAggregationsRequest(),
                        self._metadata, self._timeout)
        return [AggregationStatus.from_proto(status) for status in response.aggregations]

    def seal(self, aggregation_id: str) -> AggregationStatus:
        return self._unary(self._stub.SealAggregation,
                           control_pb2.SealAggregationRequest(aggregation_id=aggregation_id))

    def cancel(self, aggregation_id: str, reason: str = "") -> AggregationStatus:
        return self._unary(self._stub.CancelAggregation,
                           control_pb2.CancelAggregationRequest(aggregation_id=aggregation_id, reason=reason))

    def watch(self, aggregation_id: str, timeout: Optional[float] = None) -> Iterator[AggregationStatus]:
        """The current status, then each change, until a final state (or `timeout` s)."""
        responses = self._stub.WatchAggregation(
            control_pb2.GetAggregationRequest(aggregation_id=aggregation_id),
            metadata=self._metadata, timeout=timeout)
        try:
            for status in responses:
                yield AggregationStatus.from_proto(status)
        except grpc.RpcError as error:
            raise FedaggError.from_rpc_error(error) from None
        finally:
            responses.cancel()

    def wait(self, aggregation_id: str, timeout: Optional[float] = None) -> AggregationStatus:
        """Blocks until the aggregation is FINALIZED, FAILED or CANCELLED; returns that status."""
        last = None
        for last in self.watch(aggregation_id, timeout):
            if last.final:
                return last
        raise FedaggError(grpc.StatusCode.DATA_LOSS, f"the watch of '{aggregation_id}' ended in state "
                          f"{last.state if last else 'unknown'}")

    def result(self, aggregation_id: str) -> Result:
        """The result of a FINALIZED aggregation (FAILED_PRECONDITION before that)."""
        chunks = self._stub.GetResult(control_pb2.GetResultRequest(aggregation_id=aggregation_id),
                                      metadata=self._metadata, timeout=self._timeout)
        try:
            return read_result(chunks)
        except grpc.RpcError as error:
            raise FedaggError.from_rpc_error(error) from None

    def privacy_spent(self, aggregation_ids: Sequence[str], sampling, delta: float,
                      accountant: str = "rdp") -> List[float]:
        """The privacy the differentially private aggregations `aggregation_ids` spent, in
        order, as rounds of `sampling` (fedagg.privacy_accounting.Sampling: how their clients
        were chosen, which fedagg does not know): epsilon at `delta` after each, with the
        noise multiplier each one's spec declares, by dp-accounting's `accountant` ("rdp" or
        "pld"; the library is needed, fedagg.privacy_accounting says how to get it). An
        aggregation that is not FINALIZED released nothing and spends nothing; one without
        privacy raises FAILED_PRECONDITION (its result is not private at all)."""
        from .privacy_accounting import PrivacyAccountant
        spent, figures = None, []
        for aggregation_id in aggregation_ids:
            status = self.get(aggregation_id)
            privacy = status.spec.proto.privacy
            if not status.spec.proto.HasField("privacy"):
                raise FedaggError(grpc.StatusCode.FAILED_PRECONDITION,
                                  f"aggregation '{aggregation_id}' declares no differential privacy: its result "
                                  "spends privacy without bound", local=True)
            if spent is None:
                spent = PrivacyAccountant(privacy.noise_multiplier, sampling, delta, accountant)
            if status.state == "FINALIZED":
                spent.record_round(1, privacy.noise_multiplier)
            figures.append(spent.epsilon())
        return figures
