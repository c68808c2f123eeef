"""FedaggError: every failure of the fedagg client, local or from the server.

A refusal found locally (a wrong shape, an index out of range) and a refusal from the
server carry the same gRPC status codes, so callers handle both alike:

    try:
        stream.contribute(spec, {"w": w})
    except fedagg.FedaggError as e:
        if e.code_name == "ALREADY_EXISTS": ...   # counted before: nothing to do
"""
import grpc

from .v1 import aggregation_pb2

_CODES_BY_NUMBER = {code.value[0]: code for code in grpc.StatusCode}


class FedaggError(Exception):
    """A refused or failed call. `code` is a grpc.StatusCode, `code_name` its name
    ("INVALID_ARGUMENT"), `message` what to fix, and `local` is True when the client
    refused the input before sending anything."""

    def __init__(self, code: grpc.StatusCode, message: str, *, local: bool = False):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.code_name = code.name
        self.message = message
        self.local = local

    @classmethod
    def from_number(cls, number: int, message: str) -> "FedaggError":
        """From a google.rpc.Code number, as a Rejection carries it."""
        return cls(_CODES_BY_NUMBER.get(number, grpc.StatusCode.UNKNOWN), message)

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> "FedaggError":
        return cls(error.code(), error.details() or "")


def check_ack_level(ack, durable: bool) -> int:
    """The contributions an ack reports, once it reached the level asked for. An update sent
    with durable=True and acknowledged only RECEIVED is counted in the server's memory, but
    the server stopped before a checkpoint held it: UNAVAILABLE, send it again."""
    if durable and ack.level != aggregation_pb2.DURABLE:
        raise FedaggError(grpc.StatusCode.UNAVAILABLE,
                          f"update to '{ack.aggregation_id}' was acknowledged RECEIVED, not DURABLE: the "
                          "server stopped before a checkpoint held it; send it again with the same client "
                          "id once the server is back (it is counted once either way)")
    return ack.contributions


def invalid_argument(message: str) -> FedaggError:
    """A local refusal of the caller's input (nothing was sent)."""
    return FedaggError(grpc.StatusCode.INVALID_ARGUMENT, message, local=True)
