"""Secure aggregation's client side (docs/SEMANTICS.md 13, docs/PROTOCOL.md 4b): one
client's part in a secure aggregation, byte for byte as the C++ client runs it
(client_stub/secure_contribution.cc over service/secagg/), so the root unmasks what this
client masked.

    status = conn.control.create("round-1", {"w": fedagg.Field("float32", [1000], "federated_sum",
                                 encoding="discretized:16@0.001")},
                                 secure=fedagg.SecureAggregation(max_cohort=100))
    ack = fedagg.contribute_securely(conn, status, "alice", {"w": w})

contribute_securely joins a cohort at the node the connection reaches (Cohorts.JoinCohort):
it advertises two X25519 public keys, receives the roster (refused, PERMISSION_DENIED,
before anything is shared when its root key is not the pinned one or the spec's),
Shamir-shares its self-mask seed and its mask private key with its neighbours (each share
sealed to that neighbour with AES-256-GCM), sends its update discretized and masked (its
self mask plus or minus a pairwise mask with every neighbour that shared, ChaCha20
keystreams added modulo 2^32, kept modulo 2^b) as an ordinary update over a Contribute
stream on the same connection, and finally seals to the root the shares that let it remove
the masks of the sum. The node relaying the stages sees neither the update nor its cohort's
sum.

The pieces, each the same bytes as its C++ counterpart:
  - key agreement (service/secagg/key_agreement.cc): X25519, then HKDF-SHA256 (no salt)
    with the context string as info;
  - sealed boxes (sealed_box.cc): AES-256-GCM, nonce (12) || ciphertext || tag (16), the
    associated data authenticated, not sent;
  - Shamir sharing (shamir.cc) over GF(2^61 - 1): the secret cut into 7-byte little-endian
    limbs, one random polynomial per limb, share x = receiver index + 1;
  - share messages (share_codec.cc): little-endian fixed widths;
  - masks (mask_expansion.cc): ChaCha20 under the seed, IV = block counter 0 then the
    nonce (field, 0, 0), word i of the keystream for coordinate i;
  - the neighbour graph (neighbour_graph.cc): a Harary graph over a Fisher-Yates order
    drawn from the graph seed's ChaCha20 stream (service/core/keyed_random.cc);
  - the cohort's context string (cohort_messages.cc), which binds every key and message.
"""
import contextlib
import os
import queue
import secrets
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import grpc
import numpy as np
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .connection import Connection, connect, spec_of
from .contribute_stream import ContributeStream
from .errors import FedaggError, invalid_argument
from .spec import DENSE, AggregationStatus, Spec
from .update_input import FieldArrays, PreparedUpdate, prepare_update
from .v1 import aggregation_pb2, secure_aggregation_pb2, secure_aggregation_pb2_grpc
from .value_encoding import DISCRETIZED

# Stage labels in key contexts (service/secagg/secagg_cohort.h).
SHARE_CHANNEL_CONTEXT = "fedagg secagg share channel"
ROOT_CHANNEL_CONTEXT = "fedagg secagg root channel"
PAIRWISE_MASK_CONTEXT = "fedagg secagg pairwise mask"

KEY_BYTES = 32
NONCE_BYTES, TAG_BYTES = 12, 16
SHAMIR_PRIME = (1 << 61) - 1
LIMB_BYTES = 7  # 56 bits: every limb is below the prime
MAX_LIMBS = 64  # share_codec.cc's bound on a decoded share
SELF_MASK_SEED, MASK_KEY = 0, 1  # share_codec.h's SecretKind
GRAPH_STREAM = 0x67726170  # "grap": the neighbour order's KeyedRandom stream
DROPOUTS = ("before_sharing", "before_input", "before_unmasking")

_MASK_SLAB = 1 << 18  # coordinates expanded at a time (a multiple of ChaCha20's 16-word block)
_U64_MAX = (1 << 64) - 1
_U128_MAX = (1 << 128) - 1


def _data_loss(message: str) -> FedaggError:
    return FedaggError(grpc.StatusCode.DATA_LOSS, message)


# ---- Key agreement (service/secagg/key_agreement.cc) ----

def derive_key(secret: bytes, info: str) -> bytes:
    """HKDF-SHA256 of `secret` with `info`, 32 bytes, no salt."""
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=info.encode()).derive(secret)


class KeyPair:
    """An X25519 key pair from the system's secure source (or from a private key)."""

    def __init__(self, private_key: Optional[bytes] = None):
        self._key = (X25519PrivateKey.generate() if private_key is None
                     else X25519PrivateKey.from_private_bytes(private_key))
        self.public_key = self._key.public_key().public_bytes(serialization.Encoding.Raw,
                                                              serialization.PublicFormat.Raw)

    @property
    def private_key(self) -> bytes:
        return self._key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                       serialization.NoEncryption())

    def agree(self, peer_public_key: bytes, context: str) -> bytes:
        """HKDF-SHA256(X25519(this private key, the peer's public key), info=context): the
        same 32 bytes on both sides. INVALID_ARGUMENT for a key X25519 refuses."""
        try:
            peer = X25519PublicKey.from_public_bytes(bytes(peer_public_key))
        except ValueError:
            raise invalid_argument("the peer's public key is not an X25519 key") from None
        try:
            shared = self._key.exchange(peer)
        except ValueError:  # an all-zero shared secret: a low-order point
            raise invalid_argument("X25519 with the peer's public key gives no usable secret (a low-order point)") \
                from None
        return derive_key(shared, context)


# ---- Sealed boxes (service/secagg/sealed_box.cc) ----

def seal(key: bytes, plaintext: bytes, associated_data: bytes) -> bytes:
    """AES-256-GCM: a fresh 12-byte nonce, the ciphertext, the 16-byte tag."""
    nonce = os.urandom(NONCE_BYTES)
    return nonce + AESGCM(key).encrypt(nonce, plaintext, associated_data)


def open_sealed(key: bytes, sealed: bytes, associated_data: bytes) -> bytes:
    """The plaintext of seal()'s message; DATA_LOSS for one changed on its way or sealed under
    other associated data."""
    if len(sealed) < NONCE_BYTES + TAG_BYTES:
        raise _data_loss(f"a sealed message of {len(sealed)} bytes is shorter than its nonce and tag")
    try:
        return AESGCM(key).decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], associated_data)
    except InvalidTag:
        raise _data_loss("a sealed message does not authenticate: it was changed on its way, or sealed for "
                         "another sender, receiver or stage") from None


# ---- Shamir sharing over GF(2^61 - 1) (service/secagg/shamir.cc) ----

@dataclass(frozen=True)
class ShamirShare:
    x: int              # 1, 2, ...: the share's point
    y: Tuple[int, ...]  # one value per 7-byte limb of the secret


def _random_element() -> int:
    """A uniform element of the field, by rejection (as shamir.cc draws it)."""
    while True:
        draw = int.from_bytes(os.urandom(8), "little") & SHAMIR_PRIME
        if draw < SHAMIR_PRIME:
            return draw


def share_secret(secret: bytes, threshold: int, points: Sequence[int]) -> List[ShamirShare]:
    """The shares of `secret` at `points` (distinct, non-zero): limb k is bytes 7k..7k+6,
    little-endian, the constant term of a polynomial of degree threshold - 1."""
    if threshold < 1 or len(points) < threshold:
        raise invalid_argument(f"Shamir sharing needs 1 <= threshold <= shares; got threshold {threshold} of "
                               f"{len(points)} shares")
    if len(set(points)) != len(points) or any(x <= 0 or x >= SHAMIR_PRIME for x in points):
        raise invalid_argument("share points must be distinct and non-zero")
    limbs = -(-len(secret) // LIMB_BYTES)
    values: List[List[int]] = [[] for _ in points]
    for limb in range(limbs):
        coefficients = [int.from_bytes(secret[limb * LIMB_BYTES:(limb + 1) * LIMB_BYTES], "little")]
        coefficients += [_random_element() for _ in range(1, threshold)]
        for i, x in enumerate(points):  # Horner
            value = 0
            for coefficient in reversed(coefficients):
                value = (value * x + coefficient) % SHAMIR_PRIME
            values[i].append(value)
    return [ShamirShare(x, tuple(y)) for x, y in zip(points, values)]


# ---- Share messages (service/secagg/share_codec.cc) ----

def _put_share(share: ShamirShare) -> bytes:
    return (share.x.to_bytes(4, "little") + len(share.y).to_bytes(4, "little")
            + b"".join(y.to_bytes(8, "little") for y in share.y))


def _get_share(data: bytes, at: int) -> Tuple[Optional[ShamirShare], int]:
    if len(data) - at < 8:
        return None, at
    x = int.from_bytes(data[at:at + 4], "little")
    limbs = int.from_bytes(data[at + 4:at + 8], "little")
    at += 8
    if limbs > MAX_LIMBS or len(data) - at < 8 * limbs:
        return None, at
    y = tuple(int.from_bytes(data[at + 8 * k:at + 8 * k + 8], "little") for k in range(limbs))
    return ShamirShare(x, y), at + 8 * limbs


def encode_key_shares(self_mask_seed: ShamirShare, mask_key: ShamirShare) -> bytes:
    """Stage 1's plaintext: the share of the self-mask seed, then the share of the mask key."""
    return _put_share(self_mask_seed) + _put_share(mask_key)


def decode_key_shares(data: bytes) -> Tuple[ShamirShare, ShamirShare]:
    seed, at = _get_share(data, 0)
    key, at = _get_share(data, at) if seed is not None else (None, at)
    if seed is None or key is None or at != len(data):
        raise _data_loss("a key-share message is malformed")
    return seed, key


def encode_revealed_shares(revealed: Sequence[Tuple[int, int, ShamirShare]]) -> bytes:
    """Stage 3's plaintext: count (uint32), then per entry owner (uint32), kind (uint8: 0 the
    self-mask seed, 1 the mask key) and the share."""
    out = [len(revealed).to_bytes(4, "little")]
    for owner, kind, share in revealed:
        out.append(owner.to_bytes(4, "little") + bytes([kind]) + _put_share(share))
    return b"".join(out)


# ---- Masks (service/secagg/mask_expansion.cc) ----

def _chacha20(key: bytes, iv: bytes):
    """OpenSSL's ChaCha20 under `key` with the 16-byte IV (32-bit block counter, 96-bit nonce)."""
    return Cipher(algorithms.ChaCha20(bytes(key), iv), mode=None).encryptor()


def add_masks(total: np.ndarray, seeds: Sequence[Tuple[bytes, int]], field_index: int) -> None:
    """total[i] += sign * mask(seed, field)[i] modulo 2^32 for each (seed, sign), in place
    (`total`: uint32): mask word i is word i of ChaCha20's keystream under the seed with the
    IV (counter 0, nonce (field, 0, 0)), little-endian."""
    iv = (0).to_bytes(4, "little") + field_index.to_bytes(4, "little") + bytes(8)
    n = total.size
    zeros = bytes(4 * min(n, _MASK_SLAB))
    for seed, sign in seeds:
        stream = _chacha20(seed, iv)
        for begin in range(0, n, _MASK_SLAB):
            end = min(n, begin + _MASK_SLAB)
            words = np.frombuffer(stream.update(zeros[:4 * (end - begin)]), "<u4")
            part = total[begin:end]
            if sign >= 0:
                np.add(part, words, out=part)
            else:
                np.subtract(part, words, out=part)


# ---- The neighbour graph (service/secagg/neighbour_graph.cc, service/core/keyed_random.cc) ----

class KeyedRandom:
    """ChaCha20's keystream under a 32-byte key, stream (`stream`, `substream`): 64-bit
    little-endian draws, and uniform integers below a bound by rejection."""

    def __init__(self, key: bytes, stream: int, substream: int):
        iv = (0).to_bytes(4, "little") + stream.to_bytes(4, "little") + substream.to_bytes(8, "little")
        self._cipher = _chacha20(key, iv)
        self._buffer = b""
        self._used = 0

    def next64(self) -> int:
        if self._used + 8 > len(self._buffer):
            self._buffer = self._cipher.update(bytes(4096))
            self._used = 0
        value = int.from_bytes(self._buffer[self._used:self._used + 8], "little")
        self._used += 8
        return value

    def below(self, bound: int) -> int:
        if bound <= _U64_MAX:
            limit = _U64_MAX - _U64_MAX % bound
            while True:
                draw = self.next64()
                if draw < limit:
                    return draw % bound
        limit = _U128_MAX - _U128_MAX % bound
        while True:
            draw = (self.next64() << 64) | self.next64()
            if draw < limit:
                return draw % bound


def harary_neighbours(clients: int, degree: int, order_seed: bytes) -> List[List[int]]:
    """Each client's neighbours, ascending: SecAgg+'s Harary graph H(degree, clients) over
    the order a Fisher-Yates shuffle draws from the seed's stream; the complete graph when
    degree >= clients - 1."""
    if clients < 2:
        raise invalid_argument(f"a cohort of {clients} client(s) has no neighbours")
    if degree < 2 or degree % 2:
        raise invalid_argument(f"the neighbour degree must be even and at least 2; got {degree}")
    if degree >= clients - 1:
        return [[b for b in range(clients) if b != a] for a in range(clients)]
    random = KeyedRandom(order_seed, GRAPH_STREAM, 0)
    order = list(range(clients))
    for i in range(clients - 1, 0, -1):
        j = random.below(i + 1)
        order[i], order[j] = order[j], order[i]
    neighbours: List[List[int]] = [[] for _ in range(clients)]
    for position in range(clients):
        for step in range(1, degree // 2 + 1):
            a, b = order[position], order[(position + step) % clients]
            neighbours[a].append(b)
            neighbours[b].append(a)
    return [sorted(chosen) for chosen in neighbours]


# ---- The cohort (service/secagg/cohort_messages.cc, secagg_cohort.h) ----

def cohort_context(aggregation_id: str, incarnation: str, cohort_id: str) -> str:
    return f"fedagg secagg cohort|{aggregation_id}|{incarnation}|{cohort_id}"


@dataclass
class Cohort:
    """What every party of one cohort knows, as rebuilt from its roster."""
    context: str
    threshold: int
    neighbours: List[List[int]]           # by client index, ascending
    keys: List[Tuple[bytes, bytes]]        # (channel public key, mask public key) by index
    root_public_key: bytes
    field_sizes: List[int]
    bits: int

    @property
    def clients(self) -> int:
        return len(self.neighbours)


def cohort_of_roster(aggregation_id: str, incarnation: str, field_sizes: List[int], bits: int,
                     roster: secure_aggregation_pb2.Roster) -> Cohort:
    """The cohort a roster describes, with cohort_messages.cc's checks (INVALID_ARGUMENT)."""
    def key32(value: bytes, what: str) -> bytes:
        if len(value) != KEY_BYTES:
            raise invalid_argument(f"{what} has {len(value)} bytes, not {KEY_BYTES}")
        return bytes(value)

    root = key32(roster.root_public_key, "the root's key")
    n = len(roster.members)
    if roster.index >= n:
        raise invalid_argument(f"the roster places this client at {roster.index} of {n}")
    if n < 2:
        raise invalid_argument(f"a cohort needs two members or more, not {n}")
    degree, threshold = roster.degree, roster.threshold
    if degree < 2 or degree % 2 or degree > 1 << 20:
        raise invalid_argument(f"the neighbour degree {degree} is not even and >= 2")
    count = min(degree, n - 1)
    if threshold < 1 or threshold > count or 2 * threshold <= count:
        raise invalid_argument(f"threshold {threshold} is not in ({count} / 2, {count}] for {count} neighbours")
    seed = key32(roster.graph_seed, "the graph seed")
    keys = [(key32(m.channel_public_key, "a channel key"), key32(m.mask_public_key, "a mask key"))
            for m in roster.members]
    return Cohort(cohort_context(aggregation_id, incarnation, roster.cohort_id), threshold,
                  harary_neighbours(n, degree, seed), keys, root, list(field_sizes), bits)


def share_keys_associated_data(cohort: Cohort, sender: int, receiver: int) -> bytes:
    return f"{cohort.context}|share-keys|{sender}|{receiver}".encode()


def unmasking_associated_data(cohort: Cohort, sender: int) -> bytes:
    return f"{cohort.context}|unmasking|{sender}".encode()


# ---- One client's stages (service/secagg/secagg_client.cc) ----

class SecAggClient:
    """One client's secrets from stage to stage: two X25519 pairs (the channel its shares
    travel on, the key its pairwise masks are agreed from) and a self-mask seed."""

    def __init__(self):
        self.channel = KeyPair()
        self.mask = KeyPair()
        self.self_seed = secrets.token_bytes(KEY_BYTES)
        self.index = -1
        self._held: Dict[int, Tuple[ShamirShare, ShamirShare]] = {}  # by sender: (seed's share, key's share)

    def share_keys(self, cohort: Cohort, index: int) -> List[Tuple[int, bytes]]:
        """Stage 1: (neighbour, message sealed to it) for each neighbour."""
        if not 0 <= index < cohort.clients:
            raise invalid_argument(f"client index {index} is not in a cohort of {cohort.clients}")
        self.index = index
        neighbours = cohort.neighbours[index]
        points = [neighbour + 1 for neighbour in neighbours]  # the receiver's index + 1
        seed_shares = share_secret(self.self_seed, cohort.threshold, points)
        key_shares = share_secret(self.mask.private_key, cohort.threshold, points)
        messages = []
        for neighbour, seed_share, key_share in zip(neighbours, seed_shares, key_shares):
            channel_key = self.channel.agree(cohort.keys[neighbour][0], f"{SHARE_CHANNEL_CONTEXT}|{cohort.context}")
            messages.append((neighbour, seal(channel_key, encode_key_shares(seed_share, key_share),
                                             share_keys_associated_data(cohort, index, neighbour))))
        return messages

    def mask_input(self, cohort: Cohort, received: Sequence[Tuple[int, bytes]],
                   inputs: Sequence[np.ndarray]) -> List[np.ndarray]:
        """Stage 2: `received` holds (sender, sealed) of the shares sent to this client (their
        senders are the neighbours its pairwise masks include); `inputs` one uint32 vector
        per field, the b-bit integers modulo 2^b. Returns the masked vectors modulo 2^b."""
        if self.index < 0:
            raise FedaggError(grpc.StatusCode.FAILED_PRECONDITION, "masking before sharing keys (stage 1)")
        if len(inputs) != len(cohort.field_sizes):
            raise invalid_argument(f"the input has {len(inputs)} fields; the cohort's spec {len(cohort.field_sizes)}")
        self._held = {}
        for sender, sealed in received:
            if sender not in cohort.neighbours[self.index] or sender in self._held:
                raise invalid_argument(f"a share from client {sender} to client {self.index} is not one client "
                                       f"{self.index} takes")
            channel_key = self.channel.agree(cohort.keys[sender][0], f"{SHARE_CHANNEL_CONTEXT}|{cohort.context}")
            opened = open_sealed(channel_key, sealed, share_keys_associated_data(cohort, sender, self.index))
            self._held[sender] = decode_key_shares(opened)
        seeds = [(self.self_seed, +1)]
        for neighbour in sorted(self._held):
            pairwise = self.mask.agree(cohort.keys[neighbour][1], f"{PAIRWISE_MASK_CONTEXT}|{cohort.context}")
            seeds.append((pairwise, +1 if self.index < neighbour else -1))
        modulus_mask = np.uint32(0xFFFFFFFF if cohort.bits >= 32 else (1 << cohort.bits) - 1)
        masked = []
        for number, (values, size) in enumerate(zip(inputs, cohort.field_sizes)):
            if values.size != size:
                raise invalid_argument(f"field {number} has {values.size} values; the spec declares {size}")
            total = np.array(values, dtype=np.uint32).reshape(-1)
            add_masks(total, seeds, number)
            total &= modulus_mask
            masked.append(total)
        return masked

    def unmask(self, cohort: Cohort, masked: Sequence[bool]) -> bytes:
        """Stage 3: `masked[c]` says whether client c's masked input is in the sum. The shares
        of its neighbours' secrets, sealed to the root: a neighbour's seed if it is in the
        sum, its mask key if not, never both. FAILED_PRECONDITION when fewer than the
        threshold are in the sum, or when this client's input is said not to be."""
        if self.index < 0 or len(masked) != cohort.clients:
            raise invalid_argument("the unmasking request does not match this client's cohort")
        if not masked[self.index]:
            raise FedaggError(grpc.StatusCode.FAILED_PRECONDITION,
                              "the unmasking request says this client's masked input is not in the sum")
        in_sum = sum(1 for flag in masked if flag)
        if in_sum < cohort.threshold:
            raise FedaggError(grpc.StatusCode.FAILED_PRECONDITION,
                              f"only {in_sum} masked inputs are in the sum, fewer than the {cohort.threshold} the "
                              "cohort's threshold needs")
        revealed = []
        for neighbour in sorted(self._held):
            seed_share, key_share = self._held[neighbour]
            revealed.append((neighbour, SELF_MASK_SEED, seed_share) if masked[neighbour]
                            else (neighbour, MASK_KEY, key_share))
        root_key = self.channel.agree(cohort.root_public_key, f"{ROOT_CHANNEL_CONTEXT}|{cohort.context}")
        return seal(root_key, encode_revealed_shares(revealed), unmasking_associated_data(cohort, self.index))


# ---- The protocol over gRPC (client_stub/secure_contribution.cc) ----

_CLOSE = object()


class _CohortCall:
    """One JoinCohort call: requests queued for gRPC's sending thread, responses read in
    turn. A call left before the protocol's end (a refusal, a dropout) is cancelled."""

    def __init__(self, channel: grpc.Channel, metadata, timeout: float):
        self._outbox: "queue.Queue[Any]" = queue.Queue()
        self._finished = False
        stub = secure_aggregation_pb2_grpc.CohortsStub(channel)
        self._responses = stub.JoinCohort(self._requests(), metadata=metadata, timeout=timeout)

    def _requests(self):
        while True:
            item = self._outbox.get()
            if item is _CLOSE:
                return
            yield item

    def send(self, request: secure_aggregation_pb2.CohortRequest) -> None:
        self._outbox.put(request)

    def expect(self, kind: str, what: str) -> secure_aggregation_pb2.CohortResponse:
        """The next response, of `kind`; or the status the node ended the call with."""
        try:
            response = next(self._responses)
        except StopIteration:
            self._end()
            raise _data_loss("the node ended the cohort stream before the protocol's end") from None
        except grpc.RpcError as error:
            self._end()
            raise FedaggError.from_rpc_error(error) from None
        if response.WhichOneof("kind") != kind:
            raise _data_loss(f"the node answered out of turn: {what} expected")
        return response

    def close(self) -> None:
        """After the last response: half-closes and waits for the call's own end."""
        self._end()
        try:
            for _ in self._responses:
                pass
        except grpc.RpcError as error:
            raise FedaggError.from_rpc_error(error) from None

    def _end(self) -> None:
        self._finished = True
        self._outbox.put(_CLOSE)

    def __enter__(self) -> "_CohortCall":
        return self

    def __exit__(self, *exc) -> None:
        if not self._finished:
            self._end()
            self._responses.cancel()


def _stopped(where: str) -> FedaggError:
    return FedaggError(grpc.StatusCode.CANCELLED, f"stopped {where}, as told (a dropout)", local=True)


def _secure_frame(spec: Spec) -> Tuple[List[int], int]:
    """The field sizes and the bit width of a secure aggregation's spec, refused locally when
    it is not one a client can mask."""
    if not spec.proto.HasField("secure"):
        raise invalid_argument(f"aggregation '{spec.aggregation_id}' does not declare secure aggregation")
    bits = {leaf.value_encoding.bits for leaf in spec.leaves}
    for leaf in spec.leaves:
        if leaf.encoding != DENSE or leaf.value_encoding.kind != DISCRETIZED or leaf.weighted:
            raise invalid_argument(f"{leaf.describe()}: a secure aggregation's fields are dense sums or means of "
                                   "discretized values")
    if len(bits) != 1:
        raise invalid_argument("a secure aggregation's fields are discretized to one bit width")
    return [leaf.num_elements for leaf in spec.leaves], bits.pop()


def contribute_securely(connection_or_target: Union[Connection, str], spec: Union[Spec, AggregationStatus],
                        client_id: str, update: Any, *, timeout: float = 300.0,
                        pinned_root_key: Optional[bytes] = None, dropout: Optional[str] = None,
                        stream: Optional[ContributeStream] = None, allow_lossy_cast: bool = False,
                        seed: Optional[int] = None) -> aggregation_pb2.Ack:
    """Runs this client's part of a secure aggregation for `update` (plain floating values,
    given as for ContributeStream.contribute; the spec must declare `secure`, as the server
    returned it: with the root's key and the incarnation) as `client_id`, and returns the ack
    of its masked update (fedagg.v1.Ack: `contributions` counted at the node) once its part
    is done and the cohort completed.

    connection_or_target: a Connection (or "host:port", connected for this call and closed
      after); the cohort stream and the masked update go over its one channel.
    timeout: seconds for the whole protocol, cohort forming included.
    pinned_root_key: the root's public key (32 bytes) as the client learnt it from the root
      itself (None: the one in `spec`); a roster with another is refused PERMISSION_DENIED
      before any secret is shared.
    dropout: "before_sharing", "before_input" or "before_unmasking": stop there, cancelling
      the cohort stream, and raise CANCELLED (tests and load generation of dropouts).
    stream: a ContributeStream already open for `client_id` on the same connection (None:
      one opened for this call and closed after).
    allow_lossy_cast, seed: as ContributeStream.contribute takes them (the discretization's
      stochastic rounding draws from `seed`).

    Raises FedaggError: INVALID_ARGUMENT for an update or spec refused locally; the node's
    status when it refused a stage or ended it without this client (DEADLINE_EXCEEDED: a
    stage missed; UNAVAILABLE: too few of the cohort shared, join again; FAILED_PRECONDITION,
    ALREADY_EXISTS, NOT_FOUND); PERMISSION_DENIED for another root key; DATA_LOSS for a
    roster or a share that does not hold together.
    """
    if dropout is not None and dropout not in DROPOUTS:
        raise invalid_argument(f"dropout '{dropout}' is not one of {', '.join(DROPOUTS)}")
    if not client_id:
        raise invalid_argument("client id is empty")
    if stream is not None and stream.client_id != client_id:
        raise invalid_argument(f"the stream is open for client '{stream.client_id}', not '{client_id}'")
    spec = spec_of(spec)
    field_sizes, bits = _secure_frame(spec)
    root_key = bytes(spec.proto.secure.root_public_key) if pinned_root_key is None else bytes(pinned_root_key)
    # The update discretized as any update of these fields is (b-bit little-endian integers).
    prepared = prepare_update(spec, update, None, allow_lossy_cast=allow_lossy_cast, seed=seed)
    width = bits // 8
    inputs = [np.frombuffer(f.values, f"<u{width}").astype(np.uint32) for f in prepared.fields]
    client = SecAggClient()
    with contextlib.ExitStack() as scope:
        if isinstance(connection_or_target, Connection):
            connection = connection_or_target
        elif isinstance(connection_or_target, str):
            connection = scope.enter_context(connect(connection_or_target))
        else:
            raise invalid_argument(f"connect with a fedagg.Connection or a 'host:port' target, not "
                                   f"{type(connection_or_target).__name__}")
        if stream is None:
            stream = scope.enter_context(connection.open_stream(client_id))
        return _run(connection, stream, spec, client_id, client, field_sizes, bits, root_key, inputs, timeout,
                    dropout)


def _run(connection: Connection, stream: ContributeStream, spec: Spec, client_id: str, client: SecAggClient,
         field_sizes: List[int], bits: int, root_key: bytes, inputs: List[np.ndarray], timeout: float,
         dropout: Optional[str]) -> aggregation_pb2.Ack:
    """The stages over one JoinCohort call and `stream` (client_stub/secure_contribution.cc)."""
    pb = secure_aggregation_pb2
    with _CohortCall(connection.channel, connection.metadata, timeout) as cohort:
        # Stage 0: advertise, and wait for the roster.
        cohort.send(pb.CohortRequest(advertise=pb.AdvertiseKeys(
            aggregation_id=spec.aggregation_id, client_id=client_id,
            channel_public_key=client.channel.public_key, mask_public_key=client.mask.public_key)))
        roster = cohort.expect("roster", "the roster").roster
        if roster.root_public_key != root_key:
            raise FedaggError(grpc.StatusCode.PERMISSION_DENIED,
                              "the node handed out a root key other than the root's: its shares would not be "
                              "sealed to the root")
        try:
            members = cohort_of_roster(spec.aggregation_id, spec.proto.incarnation, field_sizes, bits, roster)
        except FedaggError as error:
            raise _data_loss(f"the roster: {error.message}") from None
        index = roster.index
        if members.keys[index] != (client.channel.public_key, client.mask.public_key):
            raise _data_loss("the roster does not hold this client's keys at its index")

        # Stage 1: the shares, one sealed to each neighbour.
        if dropout == "before_sharing":
            raise _stopped("before sharing its keys")
        cohort.send(pb.CohortRequest(shares=pb.ShareKeys(shares=[
            pb.SealedShare(peer=neighbour, sealed=sealed) for neighbour, sealed in client.share_keys(members, index)])))

        # Stage 2: the masked update, an ordinary update of b-bit integers.
        shared = cohort.expect("shared_keys", "the shares for this client").shared_keys
        if dropout == "before_input":
            raise _stopped("before its masked update")
        masked = client.mask_input(members, [(one.peer, one.sealed) for one in shared.shares], inputs)
        dtype = f"<u{bits // 8}"  # word i modulo 2^b in b/8 little-endian bytes
        masked_update = PreparedUpdate(
            spec, [FieldArrays(None, words.astype(dtype).view(np.uint8)) for words in masked], None)
        ack = stream.send_prepared(masked_update)

        # Stage 3: whose update is in the sum; the shares that unmask it, sealed to the root.
        survivors = cohort.expect("survivors", "the survivors").survivors
        if dropout == "before_unmasking":
            raise _stopped("before its unmasking shares")
        if len(survivors.masked) != members.clients:
            raise _data_loss("the survivors do not match the roster")
        sealed = client.unmask(members, list(survivors.masked))
        cohort.send(pb.CohortRequest(unmasking=pb.UnmaskingShares(sealed=sealed)))
        cohort.expect("done", "the end")
        cohort.close()
        return ack
