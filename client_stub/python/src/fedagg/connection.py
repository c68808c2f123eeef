"""Connecting to a fedagg server: plaintext, TLS or mutual TLS, with an optional bearer
token (docs/PROTOCOL.md, section 2). A Connection holds one gRPC channel and gives the
control client, Contribute streams, the Submit path and the task path (GetTask).
"""
import os
from typing import Any, List, Optional, Sequence, Tuple, Union

import grpc

from .contribute_stream import ContributeStream
from .control import ControlClient, call
from .errors import check_ack_level, invalid_argument
from .spec import AggregationStatus, Spec
from .update_encoder import DEFAULT_CHUNK_BYTES, check_chunk_bytes, encode_update
from .update_input import prepare_update
from .v1 import aggregation_pb2, aggregation_pb2_grpc

Pem = Union[bytes, str, "os.PathLike[str]"]


def _pem(value: Optional[Pem]) -> Optional[bytes]:
    """PEM bytes as given, or read from a file path."""
    if value is None or isinstance(value, bytes):
        return value
    with open(value, "rb") as f:
        return f.read()


def spec_of(spec: Union[Spec, AggregationStatus]) -> Spec:
    return spec.spec if isinstance(spec, AggregationStatus) else spec


class Connection:
    """One channel to a fedagg server. Use as a context manager, or call close()."""

    def __init__(self, channel: grpc.Channel, token: Optional[str], timeout: float):
        self.channel = channel
        self.metadata: Tuple[Tuple[str, str], ...] = (("authorization", f"Bearer {token}"),) if token else ()
        self.timeout = timeout
        self.control = ControlClient(channel, self.metadata, timeout)
        self._aggregation = aggregation_pb2_grpc.AggregationStub(channel)
        # Updates go out as the bytes update_encoder writes: the calls that carry them
        # send requests as they are.
        service = "/" + aggregation_pb2.DESCRIPTOR.services_by_name["Aggregation"].full_name
        self._submit_serialized = channel.stream_unary(
            service + "/Submit", request_serializer=bytes, response_deserializer=aggregation_pb2.SubmitResponse.FromString)
        self._contribute_serialized = channel.stream_stream(
            service + "/Contribute", request_serializer=bytes,
            response_deserializer=aggregation_pb2.ContributeResponse.FromString)

    def open_stream(self, client_id: str, *, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                    max_attempts: int = 8, initial_backoff_s: float = 0.025) -> ContributeStream:
        """A Contribute stream for `client_id` (the exactly-once key of its updates)."""
        return ContributeStream(self._contribute_serialized, client_id, self.metadata, chunk_bytes=chunk_bytes,
                                max_attempts=max_attempts, initial_backoff_s=initial_backoff_s)

    def submit(self, client_id: str, spec: Union[Spec, AggregationStatus], fields: Any,
               weight: Optional[float] = None, *, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
               durable: bool = False, allow_lossy_cast: bool = False, seed: Optional[int] = None) -> int:
        """Sends one update over Aggregation.Submit (no bidirectional stream needed), after
        checking it locally. Returns the contributions counted at the server after it; with
        durable=True, once a checkpoint on the server's disk holds the update.
        allow_lossy_cast=True casts values that the declared dtype cannot hold exactly.
        `seed` draws the stochastic rounding of fields with a value encoding (None: a fresh
        random one for this update)."""
        update = prepare_update(spec_of(spec), fields, weight, allow_lossy_cast=allow_lossy_cast, seed=seed)
        check_chunk_bytes(chunk_bytes)
        if not client_id:
            raise invalid_argument("client id is empty")
        requests = encode_update(update, aggregation_pb2.SubmitRequest, chunk_bytes, client_id, durable)
        try:
            response = call(self._submit_serialized, requests, self.metadata, self.timeout)
        finally:
            # A call that failed before sending everything leaves the request generator
            # unfinished, holding the update's arrays, in a reference cycle of gRPC's that
            # only the cyclic garbage collector frees: closing it drops them now, so that a
            # process that submits update after update (the FLARE aggregator forwards every
            # client result) holds one. One that gRPC's sending thread is still in is left
            # to it.
            try:
                requests.close()
            except ValueError:
                pass
        return check_ack_level(response.ack, durable)

    def get_tasks(self, client_id: str, max_tasks: int = 1) -> List[Spec]:
        """Open aggregations this client has not contributed to (Aggregation.GetTask)."""
        response = call(self._aggregation.GetTask,
                        aggregation_pb2.GetTaskRequest(client_id=client_id, max_tasks=max_tasks),
                        self.metadata, self.timeout)
        return [Spec(task) for task in response.tasks]

    def close(self):
        self.channel.close()

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def connect(target: str, *, token: Optional[str] = None, tls: bool = False,
            root_certificates: Optional[Pem] = None, certificate_chain: Optional[Pem] = None,
            private_key: Optional[Pem] = None, server_name: Optional[str] = None,
            timeout: float = 30.0, max_receive_message_bytes: Optional[int] = None,
            keepalive_s: float = 20.0, options: Sequence[Tuple[str, Any]] = ()) -> Connection:
    """Connects to `target` ("host:port").

    token: a bearer token, sent as `authorization: Bearer <token>` on every call.
    tls / root_certificates: TLS, verifying the server against the given CA (PEM bytes or
      a file path) or, without one, the system's roots.
    certificate_chain + private_key: mutual TLS (implies tls).
    server_name: the name to verify the server's certificate against, when it differs
      from the target's host.
    timeout: seconds for each unary call and each Submit.
    max_receive_message_bytes: raise it when specs with large broadcast tensors exceed
      gRPC's default 4 MiB (docs/PROTOCOL.md, "Message sizes").
    keepalive_s: while a call is open, the connection is pinged after this many seconds
      without traffic and dropped when a ping is not answered within as long again, so a
      stream waiting for an ack from a server cut off by the network ends with UNAVAILABLE
      (and the update is sent again) instead of waiting forever. At least 1.
    options: further gRPC channel options; a keepalive option given here replaces the one
      keepalive_s sets.
    """
    if (certificate_chain is None) != (private_key is None):
        raise invalid_argument("mutual TLS needs both certificate_chain and private_key")
    if keepalive_s < 1:
        raise invalid_argument(f"keepalive_s is {keepalive_s}; fedagg servers take pings at most every 0.5 s, "
                               "give at least 1")
    keepalive_ms = int(keepalive_s * 1000)
    given = {name for name, _ in options}
    channel_options = [(name, value) for name, value in (
        ("grpc.keepalive_time_ms", keepalive_ms), ("grpc.keepalive_timeout_ms", keepalive_ms),
        ("grpc.http2.max_pings_without_data", 0),  # a stream waiting for its ack sends no data
    ) if name not in given] + list(options)
    if max_receive_message_bytes is not None:
        channel_options.append(("grpc.max_receive_message_length", max_receive_message_bytes))
    if server_name is not None:
        channel_options.append(("grpc.ssl_target_name_override", server_name))
    if tls or root_certificates is not None or certificate_chain is not None:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=_pem(root_certificates), private_key=_pem(private_key),
            certificate_chain=_pem(certificate_chain))
        channel = grpc.secure_channel(target, credentials, options=channel_options)
    else:
        channel = grpc.insecure_channel(target, options=channel_options)
    return Connection(channel, token, timeout)


