"""ContributeStream: one Aggregation.Contribute stream (docs/PROTOCOL.md, section 3).

Hello and Welcome on opening; then each contribute() checks the update locally, sends its
header, chunks and end, and waits for the server's answer: the number of contributions
counted after it, or a FedaggError with the rejection's status code (the stream stays
usable after a rejection). Updates refused with UNAVAILABLE (an intermediate aggregator
still joining the aggregation at its parent) are sent again with doubling backoff, as the
C++ client does: the server counts an update once per client id, so this is safe.
"""
import queue
import threading
import time
from typing import Any, Iterator, List, Optional, Tuple, Union

import grpc

from .errors import FedaggError, check_ack_level
from .spec import AggregationStatus, Spec
from .update_encoder import DEFAULT_CHUNK_BYTES, check_chunk_bytes, encode_update
from .update_input import PreparedUpdate, prepare_update
from .v1 import aggregation_pb2

_CLOSE = object()


class ContributeStream:
    def __init__(self, contribute_call, client_id: str, metadata: Tuple[Tuple[str, str], ...], *,
                 chunk_bytes: int = DEFAULT_CHUNK_BYTES, max_attempts: int = 8,
                 initial_backoff_s: float = 0.025):
        self.client_id = client_id
        self.chunk_bytes = check_chunk_bytes(chunk_bytes)
        self._max_attempts = max_attempts
        self._initial_backoff_s = initial_backoff_s
        # Each item is an iterator of serialized requests (one update), consumed by gRPC's
        # sending thread as it needs the next message; _CLOSE half-closes the stream.
        # contribute_call sends requests as they are (Connection makes it).
        self._outbox: "queue.Queue[Any]" = queue.Queue()
        self._lock = threading.Lock()  # one update in flight per stream
        self._closed = False
        self._responses = contribute_call(self._requests(), metadata=metadata)
        self._outbox.put(iter([aggregation_pb2.ContributeRequest(
            hello=aggregation_pb2.Hello(protocol_version=1, client_id=client_id)).SerializeToString()]))
        response = self._next_response()
        if response.WhichOneof("kind") != "welcome":
            self._abort()
            raise FedaggError(grpc.StatusCode.INTERNAL, "the server answered Hello with something other than Welcome")
        self.protocol_version = response.welcome.protocol_version
        self.open_aggregations: List[Spec] = [Spec(s) for s in response.welcome.open_aggregations]

    def _requests(self) -> Iterator[bytes]:
        while True:
            item = self._outbox.get()
            if item is _CLOSE:
                return
            yield from item

    def _next_response(self) -> aggregation_pb2.ContributeResponse:
        try:
            return next(self._responses)
        except StopIteration:
            self._end_requests()
            raise FedaggError(grpc.StatusCode.UNAVAILABLE, "the server closed the stream without answering") from None
        except grpc.RpcError as error:
            self._end_requests()
            raise FedaggError.from_rpc_error(error) from None

    def _end_requests(self):
        """The stream is over: release gRPC's sending thread from waiting on the outbox."""
        self._closed = True
        self._outbox.put(_CLOSE)

    def _send_once(self, update: PreparedUpdate, durable: bool) -> aggregation_pb2.Ack:
        self._outbox.put(encode_update(update, aggregation_pb2.ContributeRequest, self.chunk_bytes, durable=durable))
        response = self._next_response()
        kind = response.WhichOneof("kind")
        if kind == "ack":
            check_ack_level(response.ack, durable)
            return response.ack
        if kind == "rejection":
            raise FedaggError.from_number(response.rejection.code, response.rejection.message)
        raise FedaggError(grpc.StatusCode.INTERNAL, f"unexpected {kind} while waiting for an ack")

    def contribute(self, spec: Union[Spec, AggregationStatus], fields: Any,
                   weight: Optional[float] = None, *, durable: bool = False,
                   allow_lossy_cast: bool = False, seed: Optional[int] = None) -> int:
        """Checks the update against `spec` (see fedagg.update_input for what `fields`
        may hold), sends it, and returns the contributions counted at the server after it.
        With durable=True the call returns once a checkpoint on the server's disk holds the
        update (a server without --checkpoint_dir refuses with FAILED_PRECONDITION).
        allow_lossy_cast=True casts values that the declared dtype cannot hold exactly.
        `seed` draws the stochastic rounding of fields with a value encoding (None: a fresh
        random one); an update sent again after UNAVAILABLE is the same bytes."""
        update = prepare_update(spec.spec if isinstance(spec, AggregationStatus) else spec, fields, weight,
                                allow_lossy_cast=allow_lossy_cast, seed=seed)
        return self.send_prepared(update, durable=durable).contributions

    def send_prepared(self, update: PreparedUpdate, *, durable: bool = False) -> aggregation_pb2.Ack:
        """Sends an update already in its wire form (prepare_update's, or one whose values a
        caller wrote itself, as fedagg.secure_aggregation writes its masked integers) with
        no further checks, and returns the server's ack; sent again after UNAVAILABLE as
        contribute() does."""
        with self._lock:
            backoff = self._initial_backoff_s
            for attempt in range(1, self._max_attempts + 1):
                if self._closed:
                    raise FedaggError(grpc.StatusCode.FAILED_PRECONDITION, "the stream is closed")
                try:
                    return self._send_once(update, durable)
                except FedaggError as error:
                    if error.code != grpc.StatusCode.UNAVAILABLE or self._closed or attempt == self._max_attempts:
                        raise
                time.sleep(backoff)
                backoff *= 2
        raise AssertionError("unreachable")

    def close(self):
        """Half-closes the stream and waits for the server to end it."""
        if self._closed:
            return
        self._end_requests()
        try:
            for _ in self._responses:
                pass
        except grpc.RpcError as error:
            raise FedaggError.from_rpc_error(error) from None

    def _abort(self):
        self._end_requests()
        self._responses.cancel()

    def __enter__(self) -> "ContributeStream":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is None:
            self.close()
        else:
            self._abort()
