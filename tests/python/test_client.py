"""The fedagg Python package against a live fedagg-server: aggregations created from Python
descriptions, dense, sparse and row-sparse updates from NumPy and SciPy inputs, results
checked against NumPy-computed expectations, local and server refusals with their status
codes, durable acks, the task path, watch/cancel, TLS with client certificates and bearer tokens, and
fields with value encodings (quantized, discretized)."""
import math
import os
import sys

import grpc
import numpy as np
import pytest
import scipy.sparse

import fedagg
from conftest import finish

F = fedagg.Field
rng = np.random.default_rng(7)


def test_the_installed_package_is_under_test():
    assert fedagg.__file__.startswith(sys.prefix), fedagg.__file__
    assert sys.prefix != sys.base_prefix  # a virtual environment
    from fedagg.v1 import aggregation_pb2_grpc, control_pb2_grpc  # generated at install time
    assert aggregation_pb2_grpc.AggregationStub and control_pb2_grpc.ControlStub


def test_chunks_are_written_as_protobuf_writes_them():
    """update_encoder writes chunk requests by hand; they must be protobuf's own bytes, for
    both request types, with zero-valued scalars left out and data of any length."""
    from fedagg.update_encoder import chunk_request
    from fedagg.v1 import aggregation_pb2 as pb
    for request_type in (pb.SubmitRequest, pb.ContributeRequest):
        for field, section, offset, size in [(0, pb.INDICES, 0, 1), (0, pb.VALUES, 0, 5), (3, pb.VALUES, 127, 128),
                                             (200, pb.INDICES, 1 << 40, 300), (1, pb.VALUES, 4 << 20, 4 << 20)]:
            data = rng.integers(0, 256, size, dtype=np.uint8)
            expected = request_type(chunk=pb.Chunk(field=field, section=section, offset=offset,
                                                   data=data.tobytes())).SerializeToString()
            assert chunk_request(request_type, field, section, offset, memoryview(data)) == expected


def test_dense_fields_match_numpy(conn):
    status = conn.control.create("py-dense", {
        "layer": {"w": F("float32", (4, 3), "federated_mean"), "b": F("float64", (3,), "federated_sum")},
        "h": F("float16", (5,), "federated_max"),
        "steps": F("int32", (), "federated_sum"),
    }, min_contributions=3)
    assert [leaf.path for leaf in status.spec.leaves] == ["layer.w", "layer.b", "h", "steps"]
    # float64 draws for the float32 and float16 fields: rounded on request (allow_lossy_cast),
    # as a training loop in float64 that declared float32 asks for. int64 steps fit int32.
    updates = [{"layer": {"w": rng.normal(size=(4, 3)), "b": rng.normal(size=3)},
                "h": rng.normal(size=5), "steps": np.int64(i + 10)} for i in range(3)]
    with conn.open_stream("alice") as stream:
        assert [s.aggregation_id for s in stream.open_aggregations].count("py-dense") == 1
        assert stream.contribute(status, updates[0], allow_lossy_cast=True) == 1
    with conn.open_stream("bob", chunk_bytes=7) as stream:  # tiny chunks: offsets and CRC across them
        assert stream.contribute(status.spec, updates[1], allow_lossy_cast=True) == 2
    assert conn.submit("carol", status, updates[2], allow_lossy_cast=True) == 3  # the Submit path

    result = finish(conn, "py-dense")
    assert result.contributions == 3
    w = np.mean([u["layer"]["w"].astype(np.float32) for u in updates], axis=0)
    np.testing.assert_allclose(result["layer.w"].values, w, rtol=1e-6)
    assert result["layer.w"].values.dtype == np.float32 and result["layer.w"].values.shape == (4, 3)
    np.testing.assert_allclose(result["layer.b"].values, sum(u["layer"]["b"] for u in updates), rtol=1e-12)
    np.testing.assert_array_equal(result["h"].values,
                                  np.max([u["h"].astype(np.float16) for u in updates], axis=0).astype(np.float32))
    assert result["steps"].values == 33 and result["steps"].values.dtype == np.int64


def test_sparse_fields_from_tuples_scipy_and_dense(conn):
    status = conn.control.create("py-sparse", {
        "s": F("float32", (10,), "sparse_sum"),
        "u": F("int64", (4, 5), "sparse_sum_sparse", True),
        "m": F("float64", (8,), "sparse_mean", True),
    }, min_contributions=3)
    u_a = scipy.sparse.csr_matrix(([5, 7], ([0, 3], [1, 4])), shape=(4, 5))        # the field's 2-D shape
    u_b = scipy.sparse.coo_matrix(([2, 3], ([0, 0], [6, 19])), shape=(1, 20))      # a row vector
    u_c = np.zeros((4, 5), np.int64)
    u_c[0, 1] = -5                                                                 # dense: non-zeros sent
    m_c = np.zeros(8)
    m_c[[1, 7]] = [4.0, 8.0]
    updates = [
        {"s": ([1, 9, 1], [1.0, 2.0, 3.0]), "u": u_a, "m": fedagg.Sparse([1, 2], [2.0, 0.0])},
        {"s": scipy.sparse.csr_matrix(np.float32([[0, 0, 0, 4, 0, 0, 0, 0, 0, 5]])), "u": u_b,
         "m": ([2, 2], [1.0, 5.0])},
        {"s": np.float32([0, 1, 0, 0, 0, 0, 0, 0, 0, 1]), "u": u_c, "m": m_c},
    ]
    for i, update in enumerate(updates):
        assert conn.submit(f"client-{i}", status, update) == i + 1
    result = finish(conn, "py-sparse")

    np.testing.assert_array_equal(result["s"].values, np.float32([0, 5, 0, 4, 0, 0, 0, 0, 0, 8]))
    assert not result["s"].is_sparse
    # sparse_sum_sparse over linear indices: (0,1) -> 1 and (3,4) -> 19 from a, 6 and 19 from b,
    # 1 from c; the sum at 1 is 0 and stays listed.
    expected_u = np.zeros(20, np.int64)
    np.add.at(expected_u, [1, 19, 6, 19, 1], [5, 7, 2, 3, -5])
    touched = np.array([1, 6, 19])
    assert result["u"].is_sparse
    np.testing.assert_array_equal(result["u"].indices, touched)
    np.testing.assert_array_equal(result["u"].values, expected_u[touched])
    np.testing.assert_array_equal(result["u"].counts, [2, 1, 2])
    np.testing.assert_array_equal(result["u"].to_dense(), expected_u.reshape(4, 5))
    np.testing.assert_array_equal(result["u"].to_scipy().toarray(), expected_u.reshape(4, 5))
    # sparse_mean divides by the updates that touched each coordinate (an explicit 0 touches;
    # a repeated index counts once).
    np.testing.assert_allclose(result["m"].values, [0, (2 + 4) / 2, (0 + 6) / 2, 0, 0, 0, 0, 8 / 1])
    np.testing.assert_array_equal(result["m"].counts, [0, 2, 2, 0, 0, 0, 0, 1])


def test_row_sparse_fields(conn):
    status = conn.control.create("py-rows", {"emb": F("float32", (6, 4), "row_sparse_mean", True),
                                             "tot": F("float64", (3, 2), "row_sparse_sum")})
    rows_a = rng.normal(size=(2, 4)).astype(np.float32)
    table_c = np.zeros((6, 4), np.float32)
    table_c[[0, 5]] = rng.normal(size=(2, 4))
    updates = [
        {"emb": fedagg.RowSparse([1, 4], rows_a), "tot": ([2], [[1.0, 2.0]])},
        {"emb": ([4], rows_a[:1] * 3), "tot": fedagg.Sparse([0, 5], [7.0, 9.0])},   # COO into row-sparse
        {"emb": table_c, "tot": np.array([[0, 0], [3.0, 0], [0, 0]])},              # dense: non-zero rows
        {"emb": ([], np.zeros((0, 4))), "tot": scipy.sparse.csr_matrix(([4.0], ([2], [0])), shape=(3, 2))},
    ]
    with conn.open_stream("rows-client") as stream:
        with pytest.raises(fedagg.FedaggError) as again:
            stream.contribute(status, updates[0])
            stream.contribute(status, updates[1])
        assert again.value.code_name == "ALREADY_EXISTS" and not again.value.local
    for i, update in enumerate(updates[1:], start=2):
        conn.submit(f"rows-{i}", status, update)
    result = finish(conn, "py-rows")
    assert result.contributions == 4

    emb = np.zeros((6, 4), np.float32)
    emb[0], emb[5] = table_c[0], table_c[5]
    emb[1] = rows_a[0]
    emb[4] = (rows_a[1] + rows_a[0] * 3) / 2
    np.testing.assert_allclose(result["emb"].values, emb, rtol=1e-6)
    np.testing.assert_array_equal(result["emb"].counts, [1, 1, 0, 0, 2, 1])
    np.testing.assert_array_equal(result["tot"].values, [[7.0, 0], [3.0, 0], [1.0 + 4.0, 11.0]])


def test_weighted_mean_bfloat16_and_chunking(conn):
    n = 1_500_000  # 6 MB of float32: more than one 4 MiB message, so it must be chunked
    status = conn.control.create("py-weighted", {
        "w": F("float32", (n,), "federated_weighted_mean"),
        "bf": F("bfloat16", (4,), "federated_sum"),
    })
    big = [rng.normal(size=n).astype(np.float32) for _ in range(2)]
    bf = [np.float32([1.0, 1 / 3, 1000.5, -2.0]), np.float32([0.5, 1 / 3, 0.25, 3e38])]
    weights = [1.5, 0.5]
    with conn.open_stream("w-a") as stream:
        # float32 1/3 becomes another value in bfloat16: refused unless asked for.
        with pytest.raises(fedagg.FedaggError) as lossy:
            stream.contribute(status, {"w": big[0], "bf": bf[0]}, weight=weights[0])
        assert lossy.value.local and "element 1 (0.3333333432674408) would become 0.333984375 in bfloat16" \
            in lossy.value.message, lossy.value.message
        assert stream.contribute(status, {"w": big[0], "bf": bf[0]}, weight=weights[0], allow_lossy_cast=True) == 1
    with conn.open_stream("w-b", chunk_bytes=(3 << 20) - 1) as stream:  # chunks that split elements
        assert stream.contribute(status, {"w": big[1], "bf": bf[1]}, weight=weights[1], allow_lossy_cast=True) == 2
    result = finish(conn, "py-weighted")
    assert result.weight_sum == 2.0
    expected = (big[0] * np.float32(1.5) + big[1] * np.float32(0.5)) / np.float32(2.0)
    np.testing.assert_allclose(result["w"].values, expected, rtol=1e-5, atol=1e-6)

    def bfloat16(x):  # round to nearest even, as bfloat16 keeps the top 16 bits of a float32
        bits = x.view(np.uint32).astype(np.uint64)
        return (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
    np.testing.assert_array_equal(result["bf"].values, bfloat16(bf[0]) + bfloat16(bf[1]))
    assert bfloat16(np.float32([1000.5]))[0] == 1000.0  # the values did travel as bfloat16


def test_scalar_fields_of_every_dtype(conn):
    """A scalar field is a 0-d array: every dtype converts it (bfloat16's rounding once
    failed there, under NumPy's casting rules for 0-d operands), dense or as a sparse pair."""
    dtypes = ["float32", "float64", "float16", "bfloat16", "int32", "int64"]
    status = conn.control.create("py-scalars", {
        **{f"d_{dtype}": F(dtype, (), "federated_sum") for dtype in dtypes},
        **{f"s_{dtype}": F(dtype, (), "sparse_mean") for dtype in dtypes},
    }, min_contributions=2)
    updates = [{**{f"d_{dtype}": np.float32(1.5 * (i + 1)) if dtype[0] == "f" else np.int64(i + 1) for dtype in dtypes},
                **{f"s_{dtype}": ([0], [2.0 * (i + 1)] if dtype[0] == "f" else [i + 1]) for dtype in dtypes}}
               for i in range(2)]
    for i, update in enumerate(updates):
        assert conn.submit(f"scalar-{i}", status, update) == i + 1
    result = finish(conn, "py-scalars")
    for dtype in dtypes:
        assert result[f"d_{dtype}"].values.shape == ()
        assert result[f"d_{dtype}"].values == (4.5 if dtype[0] == "f" else 3), dtype
        assert result[f"s_{dtype}"].values == (3.0 if dtype[0] == "f" else 1.5), dtype


def test_an_empty_sparse_result_still_has_its_counts(conn):
    """Counts asked for are reported also when no update touched a coordinate: a
    sparse_sum_sparse result with no entry has empty indices and empty counts, not None."""
    status = conn.control.create("py-empty-union", {"u": F("float32", (5,), "sparse_sum_sparse", True),
                                                    "s": F("float32", (3,), "sparse_sum")})
    conn.submit("empty", status, {"u": ([], []), "s": ([], [])})
    result = finish(conn, "py-empty-union")
    assert result.contributions == 1
    assert result["u"].is_sparse and result["u"].indices.size == 0 and result["u"].values.size == 0
    assert result["u"].counts is not None and result["u"].counts.size == 0
    assert result["s"].counts is None  # not asked for
    np.testing.assert_array_equal(result["u"].to_dense(), np.zeros(5, np.float32))


def test_local_refusals_are_raised_before_sending(conn, unreachable):
    status = conn.control.create("py-local", {"w": F("float32", (3,), "federated_sum"),
                                              "s": F("int32", (5,), "sparse_sum")}, require_finite=True)
    good = {"w": np.ones(3), "s": ([0], [1])}
    bad_updates = {
        "wrong shape": ({"w": np.ones(4), "s": ([0], [1])}, None, "expected shape (3,), got (4,)"),
        "index out of range": ({"w": np.ones(3), "s": ([5], [1])}, None, "index 5 at position 0 is out of range [0, 5)"),
        "value per index": ({"w": np.ones(3), "s": ([0, 1], [1])}, None, "one value per index"),
        "float into int": ({"w": np.ones(3), "s": ([0], [1.5])}, None, "do not convert to int32"),
        "lossy cast": ({"w": np.float64([1, 0.1, 2]), "s": ([0], [1])}, None,
                       "values are float64 but the field declares float32: element 1 (0.1) would become "
                       "0.10000000149011612 in float32, so the cast is not done silently"),
        "overflow": ({"w": np.ones(3), "s": ([0], [2 ** 40])}, None, "outside the range of int32"),
        "not finite": ({"w": np.float32([1, np.nan, 0]), "s": ([0], [1])}, None, "requires finite values"),
        "missing field": ({"w": np.ones(3)}, None, "missing: ['s']"),
        "unknown field": ({**good, "x": 1}, None, "unknown: ['x']"),
        "weight": (good, 2.0, "has no weighted field"),
    }
    for name, (update, weight, message) in bad_updates.items():
        # Against a server that is not there: a local refusal is the only way to get
        # INVALID_ARGUMENT instead of UNAVAILABLE.
        with pytest.raises(fedagg.FedaggError) as refused:
            unreachable.submit("c", status, update, weight)
        assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT, name
        assert refused.value.local and message in refused.value.message, (name, refused.value.message)
        assert str(refused.value).startswith("INVALID_ARGUMENT: ")
    with pytest.raises(fedagg.FedaggError) as down:
        unreachable.submit("c", status, good)
    assert down.value.code_name == "UNAVAILABLE" and not down.value.local
    # The live stream refuses locally too, and stays usable.
    with conn.open_stream("local-client") as stream:
        with pytest.raises(fedagg.FedaggError):
            stream.contribute(status, bad_updates["wrong shape"][0])
        assert stream.contribute(status, good) == 1
    assert conn.control.get("py-local").contributions == 1


def test_server_refusals_carry_their_status_codes(conn):
    status = conn.control.create("py-server", F("float32", (2,), "federated_sum"), max_contributions=1)
    assert status.spec.leaves[0].path == "value"
    with pytest.raises(fedagg.FedaggError) as exists:
        conn.control.create("py-server", F("float32", (2,), "federated_sum"))
    assert exists.value.code_name == "ALREADY_EXISTS" and not exists.value.local
    with pytest.raises(fedagg.FedaggError) as invalid:
        conn.control.create("py-bad", F("float32", (), "row_sparse_sum"))
    assert invalid.value.code_name == "INVALID_ARGUMENT" and "needs a tensor of rank >= 1" in invalid.value.message
    with pytest.raises(fedagg.FedaggError) as early:
        conn.control.result("py-server")
    assert early.value.code_name == "FAILED_PRECONDITION"
    with conn.open_stream("first") as stream:
        assert stream.contribute(status, np.float32([1, 2])) == 1
    # max_contributions reached: the aggregation sealed itself and refuses more.
    assert conn.control.wait("py-server", timeout=30).state == "FINALIZED"
    with conn.open_stream("second") as stream:
        with pytest.raises(fedagg.FedaggError) as closed:
            stream.contribute(status, np.float32([3, 4]))
        assert closed.value.code == grpc.StatusCode.FAILED_PRECONDITION and not closed.value.local
        assert "accepts no more updates" in closed.value.message
    with pytest.raises(fedagg.FedaggError) as missing:
        conn.control.get("no-such-aggregation")
    assert missing.value.code_name == "NOT_FOUND"
    np.testing.assert_array_equal(conn.control.result("py-server")["value"].values, [1, 2])


def test_durable_acks(conn, durable_conn):
    status = durable_conn.control.create("py-durable", F("int64", (3,), "federated_sum"))
    with durable_conn.open_stream("streamed") as stream:
        assert stream.contribute(status, np.int64([1, 2, 3]), durable=True) == 1
    assert durable_conn.submit("submitted", status, np.int64([10, 20, 30]), durable=True) == 2
    checkpoints = os.listdir(os.path.join(os.environ["FEDAGG_TEST_CHECKPOINT_DIR"]))
    assert "py-durable.ckpt" in checkpoints, checkpoints
    np.testing.assert_array_equal(finish(durable_conn, "py-durable")["value"].values, [11, 22, 33])
    # A server without checkpoints refuses DURABLE and counts nothing.
    plain = conn.control.create("py-not-durable", F("int64", (3,), "federated_sum"))
    with pytest.raises(fedagg.FedaggError) as refused:
        conn.submit("c", plain, np.int64([1, 1, 1]), durable=True)
    assert refused.value.code_name == "FAILED_PRECONDITION" and not refused.value.local
    assert "--checkpoint_dir" in refused.value.message
    assert conn.control.get("py-not-durable").contributions == 0
    assert conn.submit("c", plain, np.int64([1, 1, 1])) == 1  # the same client id is still free


def test_deterministic_aggregations_give_the_same_bits_in_any_order(durable_conn, unreachable):
    """Two deterministic aggregations of the same updates, sent in opposite orders (durable
    acks: their exact partials go through checkpoints), report the same bits: the correctly
    rounded sums (math.fsum) divided once."""
    fields = {"w": F("float32", (64,), "federated_weighted_mean"), "m": F("float32", (4,), "federated_max"),
              "e": F("float32", (10, 2), "row_sparse_mean", True)}
    values = [rng.normal(size=64).astype(np.float32) * np.float32(10.0 ** rng.integers(-6, 6)) for _ in range(12)]
    weights = [float(rng.uniform(0.1, 30)) for _ in values]
    rows = [rng.integers(0, 10, 3) for _ in values]
    tables = [rng.normal(size=(3, 2)).astype(np.float32) for _ in values]
    results = []
    for name, order in (("py-det-forward", range(12)), ("py-det-backward", reversed(range(12)))):
        status = durable_conn.control.create(name, fields, deterministic=True)
        assert status.spec.deterministic
        for i in order:
            update = {"w": values[i], "m": np.float32([np.inf, 1, 2, 3]), "e": fedagg.RowSparse(rows[i], tables[i])}
            durable_conn.submit(f"c{i}", status, update, weights[i], durable=True)
        results.append(finish(durable_conn, name))
    forward, backward = results
    for field in ("w", "m", "e"):
        assert forward[field].values.tobytes() == backward[field].values.tobytes(), field
    assert forward.weight_sum == backward.weight_sum == math.fsum(weights)
    expected = [np.float32(math.fsum(float(v[k]) * w for v, w in zip(values, weights)) / math.fsum(weights))
                for k in range(64)]
    assert forward["w"].values.tobytes() == np.array(expected, np.float32).tobytes()
    assert forward["m"].values[0] == np.inf  # a max needs no exact sum: non-finite values pass
    # A summed field of a deterministic aggregation takes finite values only: refused locally.
    with pytest.raises(fedagg.FedaggError) as refused:
        unreachable.submit("nan", status, {"w": np.full(64, np.nan, np.float32), "m": np.zeros(4, np.float32),
                                           "e": fedagg.RowSparse([0], np.zeros((1, 2), np.float32))}, 1.0)
    assert refused.value.local and "requires finite values" in refused.value.message


def test_task_path_list_watch_and_cancel(conn):
    conn.control.create("py-task", {"w": F("float32", (2,), "federated_sum")}, min_contributions=5)
    tasks = [t for t in conn.get_tasks("task-client", max_tasks=100) if t.aggregation_id == "py-task"]
    assert len(tasks) == 1 and tasks[0].min_contributions == 5
    assert conn.submit("task-client", tasks[0], {"w": [1.0, 2.0]}) == 1
    assert "py-task" not in [t.aggregation_id for t in conn.get_tasks("task-client", max_tasks=100)]
    assert "py-task" in [s.aggregation_id for s in conn.control.list()]
    watch = conn.control.watch("py-task", timeout=30)
    first = next(watch)
    assert first.state == "OPEN" and first.contributions == 1
    cancelled = conn.control.cancel("py-task", "the round was abandoned")
    assert cancelled.state == "CANCELLED"
    states = [s.state for s in watch]
    assert states[-1] == "CANCELLED"
    final = conn.control.wait("py-task", timeout=30)
    assert final.state == "CANCELLED" and final.detail == "the round was abandoned"


def test_mutual_tls_and_bearer_token(secure_env):
    with fedagg.connect(secure_env["target"], token=secure_env["token"], root_certificates=secure_env["ca"],
                        certificate_chain=secure_env["cert"], private_key=secure_env["key"]) as secure:
        status = secure.control.create("py-tls", {"w": F("float64", (2,), "federated_sum")})
        with secure.open_stream("tls-client") as stream:
            assert stream.contribute(status, {"w": [0.5, 1.5]}) == 1
        np.testing.assert_array_equal(finish(secure, "py-tls")["w"].values, [0.5, 1.5])
    with open(secure_env["ca"], "rb") as ca:
        ca_bytes = ca.read()
    with fedagg.connect(secure_env["target"], root_certificates=ca_bytes, certificate_chain=secure_env["cert"],
                        private_key=secure_env["key"]) as no_token:
        with pytest.raises(fedagg.FedaggError) as unauthenticated:
            no_token.control.get("py-tls")
        assert unauthenticated.value.code_name == "UNAUTHENTICATED"
        with pytest.raises(fedagg.FedaggError) as stream_refused:
            no_token.open_stream("tls-client-2")
        assert stream_refused.value.code_name == "UNAUTHENTICATED"
    with fedagg.connect(secure_env["target"], token=secure_env["token"], root_certificates=ca_bytes,
                        timeout=5) as no_certificate:
        with pytest.raises(fedagg.FedaggError) as handshake:
            no_certificate.control.get("py-tls")
        assert handshake.value.code_name == "UNAVAILABLE"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_submitting_many_large_updates_holds_one_at_a_time(conn, dtype):
    """A process that submits update after update (the FLARE aggregator forwards every
    client result) keeps one in memory, not every one since the last garbage collection:
    sent from the caller's own array (float32, as declared) or from its converted copy."""
    import tracemalloc
    name = f"py-submit-memory-{np.dtype(dtype).name}"
    status = conn.control.create(name, {"w": F("float32", (1_000_000,), "federated_sum")})
    model = 1_000_000 * np.dtype(dtype).itemsize
    tracemalloc.start()
    try:
        for i in range(12):
            conn.submit(f"client-{i}", status, {"w": np.full(1_000_000, i, dtype)})
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert current < model and peak < 4 * model, f"{current / 2**20:.1f} MiB held, peak {peak / 2**20:.1f} MiB"
    result = finish(conn, name)
    np.testing.assert_array_equal(result["w"].values, np.full(1_000_000, 66, np.float32))


def test_quantized_mean(conn):
    """Three clients send a float32 field quantized to 8 bits (known seeds): the server's
    mean is the mean of the decoded updates, and within 3 quantization steps of the plain mean."""
    from fedagg import value_encoding as ve
    n = 10_000
    encoding = fedagg.ValueEncoding.parse("quantized:8")
    status = conn.control.create("py-quantized", {"w": F("float32", (n,), "federated_mean", encoding="quantized:8")},
                                 min_contributions=3)
    assert status.spec.leaves[0].value_encoding == encoding
    updates = [rng.normal(size=n).astype(np.float32) * np.float32(scale) for scale in (0.5, 1.0, 2.0)]
    seeds = [11, 12, 13]
    with conn.open_stream("q-0") as stream:
        assert stream.contribute(status, {"w": updates[0]}, seed=seeds[0]) == 1
    assert conn.submit("q-1", status, {"w": updates[1]}, seed=seeds[1]) == 2
    assert conn.submit("q-2", status, {"w": updates[2]}, seed=seeds[2]) == 3
    result = finish(conn, "py-quantized")["w"].values
    assert result.dtype == np.float32 and result.shape == (n,)

    decoded = [ve.decode(ve.encode(u, encoding, ve.rounding_stream(seed, 0)), encoding, n)
               for u, seed in zip(updates, seeds)]
    np.testing.assert_allclose(result, np.mean(decoded, axis=0), rtol=0, atol=1e-5)
    plain = np.mean([u.astype(np.float64) for u in updates], axis=0)
    # A client's coordinate is off by less than one step 2 s / L of its block (s: the block's
    # largest |value|); the mean by less than the mean of the steps.
    block_starts = np.arange(0, n, encoding.block_size)
    steps = [np.repeat(np.maximum.reduceat(np.abs(u.astype(np.float64)), block_starts), encoding.block_size)[:n]
             * 2 / encoding.max_code for u in updates]
    bound = np.mean(steps, axis=0)
    assert np.all(np.abs(result - plain) <= 3 * bound), np.max(np.abs(result - plain) / bound)


def test_rotated_quantized_mean(conn):
    """A rotated field: the root draws the rotation's seed when it creates the aggregation,
    clients read it from the spec and rotate before quantizing, nodes add rotated values and
    the root rotates the mean back once: it equals the mean of the decoded updates rotated
    back one by one, and heavy-tailed updates lose less to 4 bits than without the rotation."""
    from fedagg import value_encoding as ve
    n = 3 * 4096 + 500  # three rotated runs and a short last one
    status = conn.control.create("py-rotated", {
        "w": F("float32", (n,), "federated_mean", encoding="quantized:4+rotation:4096"),
        "p": F("float32", (n,), "federated_mean", encoding="quantized:4"),
    }, min_contributions=3)
    rotated, plain_encoding = (leaf.value_encoding for leaf in status.spec.leaves)
    assert rotated.rotation == 4096 and rotated.rotation_seed != 0, rotated
    assert str(rotated) == "quantized:4+rotation:4096" and not plain_encoding.rotated
    heavy = [rng.standard_t(4, size=n) * np.repeat(rng.lognormal(size=-(-n // 512)), 512)[:n] for _ in range(3)]
    updates = [h.astype(np.float32) for h in heavy]
    seeds = [21, 22, 23]
    for i, (update, seed) in enumerate(zip(updates, seeds)):
        assert conn.submit(f"r-{i}", status, {"w": update, "p": update}, seed=seed) == i + 1
    result = finish(conn, "py-rotated")
    w, p = result["w"].values, result["p"].values
    decoded = [ve.unrotate(ve.decode(ve.encode(u, rotated, ve.rounding_stream(seed, 0)), rotated, n), rotated)
               for u, seed in zip(updates, seeds)]
    np.testing.assert_allclose(w, np.mean(decoded, axis=0), rtol=0, atol=1e-4)
    exact = np.mean([u.astype(np.float64) for u in updates], axis=0)
    error_rotated = np.sum((w - exact) ** 2) / np.sum(exact ** 2)
    error_plain = np.sum((p - exact) ** 2) / np.sum(exact ** 2)
    print(f"normalized squared error of the mean: rotated {error_rotated:.3g}, not rotated {error_plain:.3g}")
    assert error_rotated < error_plain / 2, (error_rotated, error_plain)


def test_discretized_sum_and_mean_are_exact(conn):
    """Discretized fields are summed as integers: the result is the integer sum times the
    scale (divided by the count for a mean), rounded once to the result dtype."""
    from fedagg import value_encoding as ve
    status = conn.control.create("py-discretized", {
        "d": F("float32", (1000,), "federated_sum", encoding="discretized:16@0.001"),
        "m": F("float64", (50,), "federated_mean", encoding="discretized:32@1e-06"),
    }, min_contributions=3)
    d_encoding, m_encoding = (leaf.value_encoding for leaf in status.spec.leaves)
    assert str(d_encoding) == "discretized:16@0.001" and str(m_encoding) == "discretized:32@1e-06"
    updates = [{"d": rng.uniform(-10, 10, 1000).astype(np.float32), "m": rng.uniform(-1000, 1000, 50)}
               for _ in range(3)]
    seeds = [2 ** 64 - 1, 0, 987654321]
    for i, (update, seed) in enumerate(zip(updates, seeds)):
        assert conn.submit(f"d-{i}", status, update, seed=seed) == i + 1
    result = finish(conn, "py-discretized")

    def integers(name, encoding, dtype, field):
        return sum(np.frombuffer(ve.encode(u[name], encoding, ve.rounding_stream(seed, field)), dtype).astype(np.int64)
                   for u, seed in zip(updates, seeds))
    d_sum = integers("d", d_encoding, "<i2", 0)
    m_sum = integers("m", m_encoding, "<i4", 1)
    expected_d = (d_sum.astype(np.float64) * 0.001).astype(np.float32)
    expected_m = m_sum.astype(np.float64) * 1e-6 / 3.0
    assert result["d"].values.dtype == np.float32 and result["m"].values.dtype == np.float64
    assert result["d"].values.tobytes() == expected_d.tobytes()
    assert result["m"].values.tobytes() == expected_m.tobytes()
    np.testing.assert_allclose(result["d"].values, sum(u["d"].astype(np.float64) for u in updates), rtol=0,
                               atol=3 * 0.001 + 1e-5)


def test_sparse_fields_send_encoded_values(conn):
    """The sparse family's values travel encoded, their indices exact: a quantized
    sparse_sum from SciPy input, a rotated quantized sparse_sum_sparse (values rotated as
    one vector per update, rotated back by the server per update) and an exactly summed
    discretized row_sparse_mean, each against the updates' decoded values."""
    from fedagg import value_encoding as ve
    from fedagg.update_input import prepare_update
    status = conn.control.create("py-sparse-encoded", {
        "s": F("float32", (500,), "sparse_sum", encoding="quantized:8/64"),
        "u": F("float64", (300,), "sparse_sum_sparse", True, encoding="quantized:4/16+rotation:16"),
        "r": F("float32", (40, 3), "row_sparse_mean", True, encoding="discretized:16@0.001"),
    }, min_contributions=3)
    encodings = [leaf.value_encoding for leaf in status.spec.leaves]
    assert [str(e) for e in encodings] == ["quantized:8/64", "quantized:4/16+rotation:16", "discretized:16@0.001"]
    assert encodings[1].rotation_seed != 0  # drawn by the root
    updates, seeds = [], [11, 12, 13]
    for k in range(3):
        s_idx = np.sort(rng.choice(500, 90, replace=False))
        u_idx = rng.choice(300, 40, replace=False)  # unsorted: the order is the client's
        rows = np.sort(rng.choice(40, 7, replace=False))
        updates.append({
            "s": scipy.sparse.coo_matrix((rng.normal(size=90).astype(np.float32), (np.zeros(90, int), s_idx)),
                                         shape=(1, 500)),
            "u": (u_idx, rng.normal(size=40)),
            "r": (rows, rng.uniform(-5, 5, (7, 3)).astype(np.float32)),
        })
    for i, (update, seed) in enumerate(zip(updates, seeds)):
        assert conn.submit(f"se-{i}", status, update, seed=seed) == i + 1
    result = finish(conn, "py-sparse-encoded")

    # What each update sent (its indices as the client wrote them, its encoded values),
    # decoded and rotated back as the server does, summed in float64.
    expected_s = np.zeros(500)
    expected_u, touched = np.zeros(300), np.zeros(300, np.int64)
    steps, counts = np.zeros((40, 3)), np.zeros(40, np.int64)
    for update, seed in zip(updates, seeds):
        sent = prepare_update(status.spec, update, seed=seed).fields
        values = [ve.unrotate(ve.decode(f.values.tobytes(), e, f.indices.size * (3 if n == 2 else 1)), e)
                  for n, (f, e) in enumerate(zip(sent, encodings))]
        np.add.at(expected_s, sent[0].indices, values[0])
        np.add.at(expected_u, sent[1].indices, values[1])
        touched[np.unique(sent[1].indices)] += 1
        np.add.at(steps, sent[2].indices, np.frombuffer(sent[2].values.tobytes(), "<i2").reshape(-1, 3))
        counts[np.unique(sent[2].indices)] += 1
    assert result["s"].values.dtype == np.float32
    np.testing.assert_allclose(result["s"].values, expected_s, rtol=1e-5, atol=1e-5)
    assert result["u"].is_sparse
    np.testing.assert_array_equal(result["u"].indices, np.flatnonzero(touched))
    np.testing.assert_array_equal(result["u"].counts, touched[touched > 0])
    np.testing.assert_allclose(result["u"].values, expected_u[touched > 0], rtol=1e-9, atol=1e-9)
    # The discretized mean: integer sums divided by each row's count in float64, times the scale.
    with np.errstate(invalid="ignore", divide="ignore"):
        expected_r = np.where(counts[:, None] > 0, steps / counts[:, None], 0.0) * 0.001
    assert result["r"].values.dtype == np.float32
    assert result["r"].values.tobytes() == expected_r.astype(np.float32).tobytes()
    np.testing.assert_array_equal(result["r"].counts, counts)


def test_encoded_field_refusals(conn, unreachable):
    status = conn.control.create("py-encoded-refusals", {"w": F("float32", (300,), "federated_sum",
                                                                 encoding="quantized:4/64")})
    # Locally: a NaN, named by position, before anything is sent.
    w = np.zeros(300, np.float32)
    w[70] = np.nan
    with pytest.raises(fedagg.FedaggError) as nan:
        unreachable.submit("c", status, {"w": w})
    assert nan.value.local and nan.value.code_name == "INVALID_ARGUMENT"
    assert "value nan at position 70 is not finite" in nan.value.message
    # A client that does not know the field's encoding sends plain values: the wrong size.
    unaware = status.spec.proto.__class__()
    unaware.CopyFrom(status.spec.proto)
    unaware.intrinsics[0].ClearField("encoding")
    with pytest.raises(fedagg.FedaggError) as plain:
        conn.submit("unaware", fedagg.Spec(unaware), {"w": np.ones(300, np.float32)})
    assert plain.value.code_name == "INVALID_ARGUMENT" and not plain.value.local
    assert "encoded as quantized:4/64: 170 bytes" in plain.value.message, plain.value.message
    assert conn.submit("aware", status, {"w": np.ones(300, np.float32)}) == 1
    # The server refuses what build_spec refuses locally.
    proto = fedagg.build_spec("py-encoded-max", {"m": F("float32", (3,), "federated_max")})
    proto.intrinsics[0].encoding.CopyFrom(fedagg.ValueEncoding.parse("quantized:8").to_proto())
    with pytest.raises(fedagg.FedaggError) as server:
        conn.control.create(proto)
    assert server.value.code_name == "INVALID_ARGUMENT" and not server.value.local
    assert "declares encoding quantized:8" in server.value.message, server.value.message
    with pytest.raises(fedagg.FedaggError) as local:
        conn.control.create("py-encoded-max", {"m": F("float32", (3,), "federated_max", encoding="quantized:8")})
    assert local.value.local and "declares encoding quantized:8" in local.value.message
