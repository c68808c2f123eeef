"""Secure aggregation through the Python package and a live fedagg-server: Python clients
(fedagg.contribute_securely, each on a thread of its own) mask their discretized updates,
the server relays the stages and its C++ root unmasks the sum, which must be the plain sum
of exactly the updates counted, to the bit: the Python client's keys, shares, sealed boxes,
masks and neighbour graph are the C++ library's bytes. Dropouts at every stage; a Harary
graph (degree below the cohort's size); 8, 16 and 32 bits; Python and C++ clients
(fedagg-client) in one cohort; a pinned root key the roster does not carry is refused
before anything is shared; local refusals."""
import os
import threading

import grpc
import numpy as np
import pytest

import fedagg
from conftest import finish
from fedagg import secure_aggregation as sa

F = fedagg.Field
STEP = 0.25  # values are whole steps: discretizing them is exact
WIDTH = 1000


def secure_spec(conn, aggregation_id, clients, bits=16, **secure):
    secure.setdefault("max_cohort", clients)
    secure.setdefault("stage_timeout_ms", 2000)
    status = conn.control.create(aggregation_id, {"w": F("float32", (WIDTH,), "federated_sum",
                                                         encoding=f"discretized:{bits}@{STEP}")},
                                 secure=fedagg.SecureAggregation(**secure))
    assert len(status.spec.secure.root_public_key) == 32
    return status


def values_of(c, low=-20, high=20):
    """Client c's values: whole steps in [low, high]."""
    i = np.arange(WIDTH)
    return (((c * 7 + i * 3) % (high - low + 1) + low) * STEP).astype(np.float32)


def run_clients(conn, status, count, dropouts=None, bounds=(-20, 20), ways=None):
    """Runs `count` clients concurrently, client c dropping at dropouts[c] (if any) and
    connecting as ways[c] says ("target": a "host:port" of its own; "stream": over `conn`
    with a Contribute stream it opened; default: over `conn`); their outcomes (an Ack or
    the FedaggError)."""
    dropouts, ways = dropouts or {}, ways or {}
    outcomes = [None] * count

    def client(c):
        client_id, update = f"client-{c}", {"w": values_of(c, *bounds)}
        try:
            if ways.get(c) == "target":
                outcomes[c] = fedagg.contribute_securely(os.environ["FEDAGG_TEST_SERVER"], status, client_id, update,
                                                         timeout=60, dropout=dropouts.get(c))
            elif ways.get(c) == "stream":
                with conn.open_stream(client_id) as stream:
                    outcomes[c] = fedagg.contribute_securely(conn, status, client_id, update, timeout=60,
                                                             dropout=dropouts.get(c), stream=stream)
            else:
                outcomes[c] = fedagg.contribute_securely(conn, status, client_id, update, timeout=60,
                                                         dropout=dropouts.get(c))
        except fedagg.FedaggError as error:
            outcomes[c] = error

    threads = [threading.Thread(target=client, args=(c,)) for c in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def test_dropouts_at_every_stage_the_root_unmasks_the_plain_sum(conn):
    # Eight clients in one cohort (complete graph: 7 neighbours, threshold 4): one drops
    # before sharing, one before its masked update, one before unmasking. The five that
    # answer the last stage hold at least four shares of each secret the root needs.
    status = secure_spec(conn, "py-secure", 8)
    dropouts = {0: "before_sharing", 1: "before_input", 2: "before_unmasking"}
    outcomes = run_clients(conn, status, 8, dropouts)
    for c, outcome in enumerate(outcomes):
        if c in dropouts:
            assert isinstance(outcome, fedagg.FedaggError) and outcome.code_name == "CANCELLED", (c, outcome)
        else:
            assert isinstance(outcome, fedagg.v1.aggregation_pb2.Ack), (c, outcome)
            assert outcome.aggregation_id == "py-secure" and outcome.contributions >= 1
    counted = [c for c in range(8) if c not in (0, 1)]  # client 2's update is in (it left after it)
    result = finish(conn, "py-secure")
    assert result.contributions == len(counted)
    expected = np.sum([values_of(c).astype(np.float64) for c in counted], axis=0)
    np.testing.assert_array_equal(result["w"].values, expected.astype(np.float32))


@pytest.mark.skipif(not os.environ.get("FEDAGG_TEST_CLI"), reason="FEDAGG_TEST_CLI (fedagg-client) is not set")
def test_python_and_cpp_clients_share_one_cohort(conn, tmp_path):
    # Two Python clients and two fedagg-client processes (the C++ client) in one cohort:
    # each side opens the other's sealed shares and cancels the other's pairwise masks.
    import subprocess
    status = secure_spec(conn, "py-secure-mixed", 4)
    processes = []
    for c in (2, 3):
        np.save(tmp_path / f"u{c}.npy", values_of(c))
        processes.append(subprocess.Popen(
            [os.environ["FEDAGG_TEST_CLI"], f"--server={os.environ['FEDAGG_TEST_SERVER']}", f"--client_id=client-{c}",
             "submit", "py-secure-mixed", f"w={tmp_path / f'u{c}.npy'}"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outcomes = run_clients(conn, status, 2)
    for process in processes:
        output, _ = process.communicate(timeout=60)
        assert process.returncode == 0, output
    assert all(isinstance(o, fedagg.v1.aggregation_pb2.Ack) for o in outcomes), outcomes
    result = finish(conn, "py-secure-mixed")
    assert result.contributions == 4
    expected = np.sum([values_of(c).astype(np.float64) for c in range(4)], axis=0)
    np.testing.assert_array_equal(result["w"].values, expected.astype(np.float32))


def test_a_harary_graph_with_a_dropout_before_unmasking(conn):
    # Degree 4 of 8 clients: each has four neighbours in the seeded order (the graph the
    # root rebuilds must be the Python clients'), threshold 3; one leaves before unmasking.
    status = secure_spec(conn, "py-secure-harary", 8, min_cohort=8, degree=4, threshold=3)
    outcomes = run_clients(conn, status, 8, {5: "before_unmasking"})
    assert [type(o).__name__ for o in outcomes] == ["Ack"] * 5 + ["FedaggError"] + ["Ack"] * 2, outcomes
    result = finish(conn, "py-secure-harary")
    assert result.contributions == 8
    expected = np.sum([values_of(c).astype(np.float64) for c in range(8)], axis=0)
    np.testing.assert_array_equal(result["w"].values, expected.astype(np.float32))


def test_a_graph_derived_from_a_threat_model(conn):
    # 24 clients with dropout_rate 0.1: the server derives the degree and threshold
    # (service/secagg/graph_parameters.h; the clients read them from the roster), the spec
    # keeps the rates, and a client leaving before unmasking still leaves an exact sum.
    status = secure_spec(conn, "py-secure-derived", 24, min_cohort=24, dropout_rate=0.1)
    secure = status.spec.secure
    assert (secure.dropout_rate, secure.adversarial_rate, secure.degree) == (0.1, None, 0), secure
    outcomes = run_clients(conn, status, 24, {7: "before_unmasking"})
    assert [type(o).__name__ for o in outcomes].count("Ack") == 23, outcomes
    result = finish(conn, "py-secure-derived")
    assert result.contributions == 24
    expected = np.sum([values_of(c).astype(np.float64) for c in range(24)], axis=0)
    np.testing.assert_array_equal(result["w"].values, expected.astype(np.float32))
    # Rates no graph can meet are refused at creation, saying what to change.
    with pytest.raises(fedagg.FedaggError) as refused:
        secure_spec(conn, "py-secure-hopeless", 24, adversarial_rate=0.5, dropout_rate=0.3)
    assert refused.value.code_name == "INVALID_ARGUMENT" and "dropout" in str(refused.value), refused.value


@pytest.mark.parametrize("bits, bounds", [(8, (-6, 6)), (32, (-40000, 40000))])
def test_other_bit_widths(conn, bits, bounds):
    status = secure_spec(conn, f"py-secure-{bits}", 3, bits=bits)
    outcomes = run_clients(conn, status, 3, bounds=bounds, ways={0: "target", 1: "stream"})
    assert all(isinstance(o, fedagg.v1.aggregation_pb2.Ack) for o in outcomes), outcomes
    result = finish(conn, f"py-secure-{bits}")
    assert result.contributions == 3
    expected = np.sum([values_of(c, *bounds).astype(np.float64) for c in range(3)], axis=0)
    np.testing.assert_array_equal(result["w"].values, expected.astype(np.float32))


def test_another_root_key_is_refused_before_sharing(conn):
    status = secure_spec(conn, "py-secure-pinned", 3)
    outcomes = [None] * 3

    def client(c):
        try:
            outcomes[c] = fedagg.contribute_securely(conn, status, f"pinned-{c}", {"w": values_of(c)}, timeout=20,
                                                     pinned_root_key=b"r" * 32 if c == 0 else None)
        except fedagg.FedaggError as error:
            outcomes[c] = error

    threads = [threading.Thread(target=client, args=(c,)) for c in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert isinstance(outcomes[0], fedagg.FedaggError) and outcomes[0].code_name == "PERMISSION_DENIED", outcomes[0]
    # The other two are too few to share (threshold 2 of 3): their cohort ends, nothing counted.
    for outcome in outcomes[1:]:
        assert isinstance(outcome, fedagg.FedaggError) and outcome.code_name == "UNAVAILABLE", outcome
    conn.control.cancel("py-secure-pinned")


def test_a_plain_update_to_a_secure_aggregation_is_refused(conn):
    status = secure_spec(conn, "py-secure-plain", 3)
    with conn.open_stream("plain-client") as stream:
        with pytest.raises(fedagg.FedaggError) as refused:
            stream.contribute(status, {"w": values_of(1)})
    assert refused.value.code_name == "FAILED_PRECONDITION" and "JoinCohort" in refused.value.message
    conn.control.cancel("py-secure-plain")


def test_local_refusals(conn):
    plain = conn.control.create("py-secure-not", {"w": F("float32", (4,), "federated_sum")})
    with pytest.raises(fedagg.FedaggError) as refused:
        fedagg.contribute_securely(conn, plain, "c", {"w": np.zeros(4, np.float32)})
    assert refused.value.local and "does not declare secure aggregation" in refused.value.message
    status = secure_spec(conn, "py-secure-local", 3, bits=8)
    with pytest.raises(fedagg.FedaggError) as refused:  # 1000 steps do not fit 8 bits
        fedagg.contribute_securely(conn, status, "c", {"w": np.full(WIDTH, 1000 * STEP, np.float32)})
    assert refused.value.local and "8-bit range" in refused.value.message
    with pytest.raises(fedagg.FedaggError) as refused:
        fedagg.contribute_securely(conn, status, "c", {"w": values_of(0)}, dropout="halfway")
    assert refused.value.code_name == "INVALID_ARGUMENT"
    for aggregation_id in ("py-secure-not", "py-secure-local"):
        conn.control.cancel(aggregation_id)


def test_shares_recover_the_secret_and_graphs_are_regular():
    """The pieces on their own: any threshold of the shares give the secret back (7-byte
    little-endian limbs); a sealed box opens only under its associated data; the Harary graph
    gives every client `degree` distinct neighbours, symmetric, and the same graph for the
    same seed; masks of a pair cancel."""
    p = sa.SHAMIR_PRIME
    secret = bytes(range(1, 33))
    shares = sa.share_secret(secret, 3, [2, 5, 7, 9])
    assert all(len(share.y) == 5 for share in shares)

    def recover(chosen):
        limbs = []
        for limb in range(5):
            value = 0
            for j, sj in enumerate(chosen):
                weight = 1
                for m, sm in enumerate(chosen):
                    if m != j:
                        weight = weight * sm.x * pow(sm.x - sj.x, p - 2, p) % p
                value = (value + weight * sj.y[limb]) % p
            limbs.append(value)
        return b"".join(v.to_bytes(7, "little") for v in limbs)[:32]

    assert recover(shares[:3]) == secret and recover(shares[1:]) == secret
    decoded = sa.decode_key_shares(sa.encode_key_shares(shares[0], shares[1]))
    assert decoded == (shares[0], shares[1])

    key = bytes(32)
    sealed = sa.seal(key, b"plain", b"ad")
    assert len(sealed) == 12 + 5 + 16 and sa.open_sealed(key, sealed, b"ad") == b"plain"
    with pytest.raises(fedagg.FedaggError) as refused:
        sa.open_sealed(key, sealed, b"other")
    assert refused.value.code == grpc.StatusCode.DATA_LOSS

    seed = bytes(range(32))
    graph = sa.harary_neighbours(11, 4, seed)
    assert graph == sa.harary_neighbours(11, 4, seed) and graph != sa.harary_neighbours(11, 4, bytes(32))
    for a, neighbours in enumerate(graph):
        assert len(set(neighbours)) == 4 and a not in neighbours
        assert all(a in graph[b] for b in neighbours)
    assert sa.harary_neighbours(4, 64, seed) == [[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]]

    a, b = sa.KeyPair(), sa.KeyPair()
    assert a.agree(b.public_key, "x") == b.agree(a.public_key, "x") != a.agree(b.public_key, "y")
    total = np.zeros(100, np.uint32)
    sa.add_masks(total, [(seed, +1), (seed, -1)], 3)
    assert not total.any()
    sa.add_masks(total, [(seed, +1)], 0)
    sa.add_masks(total, [(seed, +1)], 1)
    assert total.any()


def test_primitives_match_published_vectors():
    # The cryptography package's primitives, as this client calls them, against the
    # vectors tests/secagg checks the C++ library with.
    # RFC 7748, section 6.1: X25519 (the agreement seen through HKDF, as KeyPair.agree gives it).
    alice = sa.KeyPair(bytes.fromhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"))
    assert alice.public_key.hex() == "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"
    shared = bytes.fromhex("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")
    bob_public = bytes.fromhex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
    assert alice.agree(bob_public, "ctx") == sa.derive_key(shared, "ctx")
    # RFC 5869, test case 3 (SHA-256, no salt, no info): the first 32 bytes of its OKM.
    assert sa.derive_key(b"\x0b" * 22, "").hex() == "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d"
    # McGrew and Viega's GCM test case 14: AES-256, zero key and nonce, one zero block.
    sealed = bytes(12) + bytes.fromhex("cea7403d4d606b6e074ec5d3baf39d18d0d1c8a799996bf0265b98b5d48ab919")
    assert sa.open_sealed(bytes(32), sealed, b"") == bytes(16)
    # RFC 8439, section 2.3.2: the ChaCha20 block of key 00..1f, counter 1, nonce
    # 00:00:00:09:00:00:00:4a:00:00:00:00, as the masks' keystream reads it.
    iv = (1).to_bytes(4, "little") + bytes.fromhex("000000090000004a00000000")
    words = np.frombuffer(sa._chacha20(bytes(range(32)), iv).update(bytes(64)), "<u4")
    assert [int(w) for w in words] == [
        0xe4e7f110, 0x15593bd1, 0x1fdd0f50, 0xc47120a3, 0xc7f4d1c7, 0x0368c033, 0x9aaa2204, 0x4e6cd4c3,
        0x466482d2, 0x09aa9f07, 0x05d7c214, 0xa2028bd9, 0xd19c12b5, 0xb94e16de, 0xe883d0cb, 0x4e3c50a2]
