"""Encodes a prepared update as fedagg.v1 request messages, exactly as the C++ client does
(client_stub/update_encoder.cc): an UpdateHeader with every field's nnz and dtype, then
Chunks of at most `chunk_bytes` per section in wire order (field 0 indices, field 0
values, field 1 indices, ...), then an UpdateEnd with the CRC-32C of all sections in
that order (docs/PROTOCOL.md, sections 3.2-3.4). A field with a value encoding has its
encoded section (fedagg.value_encoding) as its values; the header keeps its declared dtype.

The requests come out serialized, one at a time as gRPC asks for the next, and each
chunk's bytes are copied once: from the caller's array (a memoryview, over which the
checksum is computed too) straight into the request's wire bytes, written here by hand
(a Chunk is four fields) instead of through a protobuf message and its serialization,
which cost two more copies and most of the client's time. The calls send these bytes as
they are (connection.py, contribute_stream.py).
"""
from typing import Iterator, Optional, Type, Union

import crc32c

from .errors import invalid_argument
from .spec import DTYPES
from .update_input import PreparedUpdate
from .v1 import aggregation_pb2

DEFAULT_CHUNK_BYTES = 1 << 20
MAX_CHUNK_BYTES = 4 << 20  # the server refuses larger chunks

RequestType = Union[Type[aggregation_pb2.SubmitRequest], Type[aggregation_pb2.ContributeRequest]]

_CHUNK_FIELDS = aggregation_pb2.Chunk.DESCRIPTOR.fields_by_name
_VARINT, _LENGTH_DELIMITED = 0, 2


def check_chunk_bytes(chunk_bytes: int) -> int:
    if not 1 <= chunk_bytes <= MAX_CHUNK_BYTES:
        raise invalid_argument(f"chunk_bytes {chunk_bytes} must be between 1 and {MAX_CHUNK_BYTES}")
    return chunk_bytes


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _key(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


_CHUNK_SCALAR_KEYS = tuple((name, _key(_CHUNK_FIELDS[name].number, _VARINT)) for name in ("field", "section", "offset"))
_CHUNK_DATA_KEY = _key(_CHUNK_FIELDS["data"].number, _LENGTH_DELIMITED)
# Each request type's key of its `chunk` field.
_CHUNK_KEYS = {request_type: _key(request_type.DESCRIPTOR.fields_by_name["chunk"].number, _LENGTH_DELIMITED)
               for request_type in (aggregation_pb2.SubmitRequest, aggregation_pb2.ContributeRequest)}


def chunk_request(request_type: RequestType, field: int, section: int, offset: int, data: memoryview) -> bytes:
    """The serialized request_type(chunk=Chunk(field, section, offset, data)), byte for byte
    what protobuf writes (zero-valued scalars left out), with `data` copied once."""
    values = {"field": field, "section": section, "offset": offset}
    head = b"".join(key + _varint(values[name]) for name, key in _CHUNK_SCALAR_KEYS if values[name])
    head += _CHUNK_DATA_KEY + _varint(len(data))
    prefix = _CHUNK_KEYS[request_type] + _varint(len(head) + len(data)) + head
    return b"".join((prefix, data))


def encode_update(update: PreparedUpdate, request_type: RequestType, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                  client_id: Optional[str] = None, durable: bool = False) -> Iterator[bytes]:
    """Yields the serialized requests of one update: header, chunks, end. `client_id` goes
    into the header (Submit names the client there; Contribute names it in Hello);
    `durable` asks for the ack to wait until a checkpoint on the server's disk holds the
    update."""
    header = aggregation_pb2.UpdateHeader(aggregation_id=update.spec.aggregation_id,
                                          client_id=client_id or "",
                                          ack_level=aggregation_pb2.DURABLE if durable else aggregation_pb2.RECEIVED)
    if update.weight is not None:
        header.weight = update.weight
    for leaf, field in zip(update.spec.leaves, update.fields):
        header.fields.add(nnz=0 if field.indices is None else field.indices.size,
                          dtype=DTYPES[leaf.dtype][0])
    yield request_type(header=header).SerializeToString()
    crc = 0
    for number, field in enumerate(update.fields):
        for section, array in ((aggregation_pb2.INDICES, field.indices), (aggregation_pb2.VALUES, field.values)):
            if array is None or array.size == 0:
                continue
            data = memoryview(array).cast("B")
            crc = crc32c.crc32c(data, crc)
            for offset in range(0, len(data), chunk_bytes):
                yield chunk_request(request_type, number, section, offset, data[offset:offset + chunk_bytes])
    yield request_type(end=aggregation_pb2.UpdateEnd(crc32c=crc)).SerializeToString()
