"""Encodes a prepared update as fedagg.v1 messages, exactly as the C++ client does
(client_stub/update_encoder.cc): an UpdateHeader with every field's nnz and dtype, then
Chunks of at most `chunk_bytes` per section in wire order (field 0 indices, field 0
values, field 1 indices, ...), then an UpdateEnd with the CRC-32C of all sections in
that order (docs/PROTOCOL.md, sections 3.2-3.4). Chunks are made one at a time, as gRPC
asks for the next message, so an update is never held twice in memory.
"""
from typing import Iterator, Optional, Tuple, Union

import crc32c

from .errors import invalid_argument
from .spec import DTYPES
from .update_input import PreparedUpdate
from .v1 import aggregation_pb2

DEFAULT_CHUNK_BYTES = 1 << 20
MAX_CHUNK_BYTES = 4 << 20  # the server refuses larger chunks

Message = Union[aggregation_pb2.UpdateHeader, aggregation_pb2.Chunk, aggregation_pb2.UpdateEnd]


def check_chunk_bytes(chunk_bytes: int) -> int:
    if not 1 <= chunk_bytes <= MAX_CHUNK_BYTES:
        raise invalid_argument(f"chunk_bytes {chunk_bytes} must be between 1 and {MAX_CHUNK_BYTES}")
    return chunk_bytes


def encode_update(update: PreparedUpdate, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                  client_id: Optional[str] = None, durable: bool = False) -> Iterator[Tuple[str, Message]]:
    """Yields ("header" | "chunk" | "end", message). `client_id` goes into the header
    (Submit names the client there; Contribute names it in Hello); `durable` asks for the
    ack to wait until a checkpoint on the server's disk holds the update."""
    header = aggregation_pb2.UpdateHeader(aggregation_id=update.spec.aggregation_id,
                                          client_id=client_id or "",
                                          ack_level=aggregation_pb2.DURABLE if durable else aggregation_pb2.RECEIVED)
    if update.weight is not None:
        header.weight = update.weight
    for leaf, field in zip(update.spec.leaves, update.fields):
        header.fields.add(nnz=0 if field.indices is None else field.indices.size,
                          dtype=DTYPES[leaf.dtype][0])
    yield "header", header
    crc = 0
    for number, field in enumerate(update.fields):
        for section, array in ((aggregation_pb2.INDICES, field.indices), (aggregation_pb2.VALUES, field.values)):
            if array is None or array.size == 0:
                continue
            data = memoryview(array).cast("B")
            crc = crc32c.crc32c(data, crc)
            for offset in range(0, len(data), chunk_bytes):
                yield "chunk", aggregation_pb2.Chunk(field=number, section=section, offset=offset,
                                                     data=bytes(data[offset:offset + chunk_bytes]))
    yield "end", aggregation_pb2.UpdateEnd(crc32c=crc)
