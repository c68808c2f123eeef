"""fedagg.flower with real Flower (flwr's simulation engine) and real fedagg servers (a root
and two intermediates, from frameworks_test.sh): the example app
(client_stub/python/examples/flower_app.py) is run as its own process; each round's global
model must equal what Flower's own FedAvg aggregation (aggregate_arrayrecords) computes on
the same client updates, failures must be reported and quorum respected, and the Flower
server process's memory must not grow with the number of clients — a measurement that
plain FedAvg fails. Skipped when Flower is not installed."""
import glob
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

flwr = pytest.importorskip("flwr", reason="Flower is not installed (scripts/setup.sh installs it into "
                                          ".venv-frameworks; tests/python/frameworks_test.sh runs this file)")
from flwr.app import Array, ArrayRecord, MetricRecord, RecordDict  # noqa: E402
from flwr.serverapp.strategy.strategy_utils import aggregate_arrayrecords  # noqa: E402

import fedagg  # noqa: E402
import fedagg.flower  # noqa: E402
from conftest import quantized_mean_bound  # noqa: E402
from fedagg.model_layout import ModelLayout  # noqa: E402

MiB = 1 << 20


def run_app(tmp_path, name, *args):
    """Runs the example app; returns its JSON report. The app's simulation attaches to the
    Ray cluster frameworks_test.sh started (RAY_ADDRESS). A run that has not ended after
    150 s is stopped and run once more, and the test fails if the second hangs too: before
    that cluster was shared, a simulation starting its own Ray now and then stalled there
    on a loaded machine."""
    try:
        return run_app_once(tmp_path, name, 150, *args)
    except subprocess.TimeoutExpired as hung:
        print(f"{name}: the simulation hung, running it again:\n{hung.output[-2000:]}")
        return run_app_once(tmp_path, name, 150, *args)


def run_app_once(tmp_path, name, timeout_s, *args):
    report = tmp_path / f"{name}.json"
    command = [sys.executable, os.path.join(os.environ["FEDAGG_EXAMPLES"], "flower_app.py"),
               "--root", os.environ["FEDAGG_TEST_ROOT"], "--targets", os.environ["FEDAGG_TEST_INTERMEDIATES"],
               "--report", str(report), *map(str, args)]
    # Its own session, so that a run that hangs is stopped with every process it started.
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        raise subprocess.TimeoutExpired(command, timeout_s, output=output) from None
    assert process.returncode == 0, output[-6000:]
    with open(report) as f:
        return json.load(f)


def client_updates(dump, server_round):
    """The updates clients sent in a round: (arrays, num_examples) each."""
    updates = []
    for path in sorted(glob.glob(os.path.join(dump, f"update-r{server_round}-p*.npz"))):
        update = np.load(path)
        updates.append(({k: update[k] for k in update.files if k != "num_examples"}, int(update["num_examples"])))
    return updates


def flower_fedavg(dump, server_round):
    """Flower's FedAvg aggregation of the updates clients sent in a round."""
    records = [RecordDict({"arrays": ArrayRecord({k: Array(v) for k, v in arrays.items()}),
                           "metrics": MetricRecord({"num-examples": num_examples})})
               for arrays, num_examples in client_updates(dump, server_round)]
    return {k: a.numpy() for k, a in aggregate_arrayrecords(records, "num-examples").items()}, len(records)


def test_every_round_equals_flower_fedavg_on_the_same_updates(tmp_path):
    dump = tmp_path / "dump"
    dump.mkdir()
    # Partition 2 sends a malformed update in round 2: it is refused, reported, and the round
    # is the mean of the other five.
    report = run_app(tmp_path, "fedagg", "--clients", 6, "--rounds", 3, "--dump", dump, "--refuse", "2:2")
    assert [r["round"] for r in report["rounds"]] == [1, 2, 3]
    for entry in report["rounds"]:
        server_round, fedagg_report = entry["round"], entry["fedagg"]
        expected, senders = flower_fedavg(dump, server_round)
        assert senders == (5 if server_round == 2 else 6)
        assert fedagg_report["state"] == "FINALIZED"
        assert fedagg_report["contributions"] == senders
        assert fedagg_report["replies"] == senders
        if server_round == 2:
            assert len(fedagg_report["failures"]) == 1
            assert "INVALID_ARGUMENT" in fedagg_report["failures"][0], fedagg_report["failures"]
            assert "expected shape (16, 4), got (15, 4)" in fedagg_report["failures"][0]
        else:
            assert fedagg_report["failures"] == []
        got = np.load(dump / f"global-r{server_round}.npz")
        assert sorted(got.files) == sorted(expected)
        for key, value in expected.items():
            assert got[key].dtype == value.dtype, key
            np.testing.assert_allclose(got[key], value, rtol=1e-5, atol=1e-7, err_msg=f"round {server_round} {key}")
    # The sparse arrays did change (so the sparse path was exercised), only in some rows.
    start, last = np.load(dump / "global-r1.npz"), np.load(dump / "global-r3.npz")
    changed_rows = np.flatnonzero(np.any(start["embedding"] != last["embedding"], axis=1))
    assert 0 < changed_rows.size < start["embedding"].shape[0]
    assert 0 < np.count_nonzero(last["token_bias"]) < last["token_bias"].size
    assert set(report["train_metrics"]) == {"1", "2", "3"} and "loss" in report["train_metrics"]["1"]


def test_quantized_dense_arrays_stay_within_the_quantization_bound_of_flower_fedavg(tmp_path):
    """FedaggFedAvg(encoding="quantized:8"): the dense arrays travel at 8 bits a coordinate,
    and each coordinate of the new model is within the weighted mean of the clients' levels
    2 s / 255 (s: the largest |value| of its block of 256) of Flower's FedAvg of the same
    updates; the sparse arrays stay plain and equal FedAvg's as closely as without an
    encoding. The spec at the root declares the encoding on the dense arrays only."""
    dump = tmp_path / "dump"
    dump.mkdir()
    report = run_app(tmp_path, "quantized", "--clients", 4, "--rounds", 2, "--dump", dump,
                     "--encoding", "quantized:8")
    dense, sparse = ("dense.w", "dense.v", "dense.b"), ("embedding", "token_bias")
    for entry in report["rounds"]:
        server_round, fedagg_report = entry["round"], entry["fedagg"]
        assert fedagg_report["state"] == "FINALIZED" and fedagg_report["contributions"] == 4, fedagg_report
        expected, senders = flower_fedavg(dump, server_round)
        assert senders == 4
        updates = client_updates(dump, server_round)
        got = np.load(dump / f"global-r{server_round}.npz")
        for key in sparse:
            assert got[key].dtype == expected[key].dtype, key
            np.testing.assert_allclose(got[key], expected[key], rtol=1e-5, atol=1e-7,
                                       err_msg=f"round {server_round} {key}")
        off = 0.0
        for key in dense:
            assert got[key].dtype == expected[key].dtype, key
            bound = quantized_mean_bound([arrays[key] for arrays, _ in updates], [n for _, n in updates],
                                         "quantized:8")
            error = np.abs(got[key].astype(np.float64) - expected[key].astype(np.float64))
            allowed = bound + 1e-5 * np.abs(expected[key]) + 1e-7
            assert np.all(error <= allowed), (
                f"round {server_round} {key}: error {np.max(error / allowed):.3f} x the bound at worst")
            off = max(off, float(np.max(error)))
            print(f"round {server_round} {key}: worst error {np.max(error):.3g}, {np.max(error / allowed):.3f} of "
                  "the bound")
        assert off > 0, "the quantized model equals the plain one exactly: was anything quantized?"
        with fedagg.connect(os.environ["FEDAGG_TEST_ROOT"]) as root:
            leaves = {leaf.path: str(leaf.value_encoding)
                      for leaf in root.control.get(fedagg_report["aggregation_id"]).spec.leaves}
        assert leaves == {"model.embedding": "plain", "model.token_bias": "plain", "model.dense_w": "quantized:8",
                          "model.dense_v": "quantized:8", "model.dense_b": "quantized:8",
                          "num_examples": "plain"}, leaves


def test_a_round_short_of_its_quorum_fails_and_keeps_the_model(tmp_path):
    dump = tmp_path / "dump"
    dump.mkdir()
    report = run_app(tmp_path, "quorum", "--clients", 4, "--rounds", 2, "--min_contributions", 4,
                     "--dump", dump, "--refuse", "1:2")
    first, second = (entry["fedagg"] for entry in report["rounds"])
    assert first["state"] == "FINALIZED" and first["contributions"] == 4
    assert second["state"] == "FAILED" and second["contributions"] == 3, second
    assert "quorum" in second["detail"].lower() or "min" in second["detail"].lower(), second["detail"]
    before, after = np.load(dump / "global-r1.npz"), np.load(dump / "global-r2.npz")
    for key in before.files:
        np.testing.assert_array_equal(after[key], before[key])


def growth(tmp_path, strategy, small, large, vocab):
    reports = [run_app(tmp_path, f"{strategy}-{n}", "--strategy", strategy, "--clients", n, "--rounds", 2,
                       "--vocab", vocab) for n in (small, large)]
    peaks = [r["peak_anon_kib"] * 1024 for r in reports]
    return peaks[1] - peaks[0], reports[0]["model_bytes"]


SMALL, LARGE, VOCAB = 8, 40, 100_000  # a 3.6 MB model


def test_the_flower_server_memory_does_not_grow_with_clients(tmp_path):
    grown, model = growth(tmp_path, "fedagg", SMALL, LARGE, VOCAB)
    # Holding the 32 extra clients' updates would take 32 x 3.6 MB = 115 MB; the bound is
    # two models plus 16 MiB of allocator and bookkeeping noise.
    assert grown < 2 * model + 16 * MiB, f"the Flower server grew {grown / MiB:.1f} MiB from {SMALL} to {LARGE} clients"


def test_the_memory_measurement_sees_plain_fedavg_hold_every_update(tmp_path):
    """The same measurement on Flower's own FedAvg, which holds every reply's arrays: it
    must exceed the bound above by far, or the test above could not fail."""
    grown, model = growth(tmp_path, "flower", SMALL, LARGE, VOCAB)
    assert grown > (LARGE - SMALL) * model / 2, f"plain FedAvg grew only {grown / MiB:.1f} MiB"
    assert grown > 2 * model + 16 * MiB


def test_layout_is_derived_from_the_arrays():
    arrays = {"fc.weight": np.zeros((3, 2), np.float32), "fc_weight": np.zeros(2, np.float64),
              "0emb": np.zeros((5, 4), np.float16), "steps": np.int64(3), "mask": np.ones(2, bool)}
    layout = ModelLayout.from_arrays(arrays, row_sparse=["0emb"])
    assert [(f.name, f.dtype, f.kind, f.result_dtype) for f in layout.fields] == [
        ("fc_weight", "float32", "dense", "float32"), ("fc_weight_1", "float64", "dense", "float64"),
        ("a_0emb", "float16", "row_sparse", "float16"), ("steps", "float64", "dense", "float64"),
        ("mask", "float64", "dense", "float64")]
    spec = fedagg.Spec(layout.spec("layout-1"))
    assert [(leaf.path, leaf.intrinsic) for leaf in spec.leaves][-1] == ("num_examples", "federated_sum")
    back = ModelLayout.from_spec(spec, list(arrays))
    assert [(f.name, f.kind) for f in back.fields] == [(f.name, f.kind) for f in layout.fields]
    with pytest.raises(fedagg.FedaggError, match="cannot be averaged"):
        ModelLayout.from_arrays({"c": np.zeros(2, np.complex64)})
    with pytest.raises(fedagg.FedaggError, match="not in the model"):
        ModelLayout.from_arrays(arrays, sparse=["nope"])
    # A float64 value float32 cannot hold is refused for a float32 array's change, as
    # everywhere in the client, unless the cast is asked for.
    update = dict(arrays, **{"0emb": np.full((5, 4), 0.1)})
    with pytest.raises(fedagg.FedaggError, match="would become"):
        layout.update(update, 3, base=arrays)
    fields, weight = layout.update(update, 3, base=arrays, allow_lossy_cast=True)
    assert weight == 3.0 and fields["model"]["a_0emb"].dtype == np.float16


def test_layout_encoding_goes_to_the_dense_floating_arrays_only():
    arrays = {"w": np.zeros((3, 2), np.float32), "b": np.zeros(2, np.float64), "h": np.zeros(4, np.float16),
              "emb": np.zeros((5, 4), np.float32), "bias": np.zeros(5, np.float32), "steps": np.int64(3),
              "mask": np.ones(2, bool)}
    layout = ModelLayout.from_arrays(arrays, sparse=["bias"], row_sparse=["emb"], encoding="quantized:4/512")
    assert layout.encoded
    assert {f.key: str(f.encoding) for f in layout.fields} == {
        "w": "quantized:4/512", "b": "quantized:4/512", "h": "quantized:4/512", "emb": "plain", "bias": "plain",
        "steps": "plain", "mask": "plain"}
    spec = fedagg.Spec(layout.spec("layout-encoded"))
    assert {leaf.path: str(leaf.value_encoding) for leaf in spec.leaves} == {
        "model.w": "quantized:4/512", "model.b": "quantized:4/512", "model.h": "quantized:4/512",
        "model.emb": "plain", "model.bias": "plain", "model.steps": "plain", "model.mask": "plain",
        "num_examples": "plain"}
    # The client side reads the encoding back from the spec the server sent.
    back = ModelLayout.from_spec(spec, list(arrays))
    assert [str(f.encoding) for f in back.fields] == [str(f.encoding) for f in layout.fields]
    assert not ModelLayout.from_arrays(arrays).encoded
    assert not ModelLayout.from_arrays(arrays, encoding=fedagg.ValueEncoding()).encoded
    # Discretized: every encodable field of a layout is a weighted mean; refused, saying what to use.
    with pytest.raises(fedagg.FedaggError) as refused:
        ModelLayout.from_arrays(arrays, encoding="discretized:16@0.001")
    assert refused.value.code.name == "INVALID_ARGUMENT" and refused.value.local
    assert "use a quantized encoding" in refused.value.message and "weight" in refused.value.message
    with pytest.raises(fedagg.FedaggError, match="is not an encoding"):
        ModelLayout.from_arrays(arrays, encoding="quantised:8")
    # A deterministic aggregation sums exactly: quantized is refused there (by build_spec too).
    with pytest.raises(fedagg.FedaggError, match="deterministic"):
        ModelLayout.from_arrays(arrays, encoding="quantized:8").spec("layout-det", deterministic=True)
    # The strategy refuses these when it is made, not in its first round.
    with pytest.raises(fedagg.FedaggError, match="use a quantized encoding"):
        fedagg.flower.FedaggFedAvg("127.0.0.1:1", encoding="discretized:8@0.5")
    with pytest.raises(fedagg.FedaggError, match="a deterministic model layout is sent plain"):
        fedagg.flower.FedaggFedAvg("127.0.0.1:1", encoding="quantized:8", deterministic=True)
    plain = fedagg.flower.FedaggFedAvg("127.0.0.1:1", encoding="plain", deterministic=True)
    assert not plain.encoding.encoded
    plain.connection.close()


def test_dp_fedavg_is_the_clipped_mean_change_plus_noise_of_the_stated_size(tmp_path):
    """FedaggFedAvg(privacy=...): each round's model is the global one plus the mean of the
    clients' changes, each clipped to the bound over all its arrays together, plus noise of
    standard deviation z C / n on every coordinate (about 9,100 of them: six standard
    errors of the sample sd, 4.4%, is the tolerance; false alarm below 1e-8)."""
    dump = tmp_path / "dump"
    dump.mkdir()
    clip, z, n = 0.05, 1.0, 6
    report = run_app(tmp_path, "fedagg-dp", "--clients", n, "--rounds", 2, "--dump", dump, "--privacy", f"{clip},{z}")
    for entry in report["rounds"]:
        server_round, fedagg_report = entry["round"], entry["fedagg"]
        assert fedagg_report["state"] == "FINALIZED" and fedagg_report["contributions"] == n, fedagg_report
        privacy = fedagg_report["privacy"]
        assert z * clip <= privacy["noise_stddev"] < z * clip * (1 + 1e-9)
        base = np.load(dump / f"global-r{server_round - 1}.npz")
        got = np.load(dump / f"global-r{server_round}.npz")
        keys = sorted(base.files)
        changes, clipped = [], 0
        for arrays, _ in client_updates(dump, server_round):
            change = {k: arrays[k].astype(base[k].dtype).astype(np.float64) - base[k].astype(np.float64) for k in keys}
            norm = np.sqrt(sum(float(np.sum(c * c)) for c in change.values()))
            clipped += norm > clip
            changes.append({k: c * min(1.0, clip / norm) for k, c in change.items()})
        assert privacy["clipped_updates"] == clipped
        noise = np.concatenate([(got[k].astype(np.float64) - base[k].astype(np.float64)
                                 - sum(c[k] for c in changes) / n).ravel() for k in keys])
        sigma = privacy["noise_stddev"] / n
        assert abs(noise.mean()) < 6 * sigma / np.sqrt(noise.size)
        assert abs(noise.std() / sigma - 1) < 6 * np.sqrt(0.5 / noise.size), (noise.std(), sigma)


def test_dp_needs_the_expected_clients_and_plain_arrays():
    with pytest.raises(ValueError, match="expected_clients"):
        fedagg.flower.FedaggFedAvg("127.0.0.1:1", privacy=fedagg.DifferentialPrivacy(clip_norm=1, noise_multiplier=1))
    with pytest.raises(ValueError, match="plain"):
        fedagg.flower.FedaggFedAvg("127.0.0.1:1", encoding="quantized:8",
                                   privacy=fedagg.DifferentialPrivacy(clip_norm=1, noise_multiplier=1,
                                                                      expected_clients=4))


def test_flowers_adaptive_clipping_against_tffs_rule_on_a_replayed_norm_trace():
    """Flower's DifferentialPrivacyServerSideAdaptiveClipping, replayed on the norm trace
    test_differential_privacy.py replays through fedagg, without count noise: its bound
    follows exp(-lr (clipped fraction - target)), where TensorFlow Federated's (and fedagg's)
    follows exp(-lr (unclipped fraction - target)), so on a round whose every update is
    clipped Flower's bound shrinks and TFF's grows. (Its noise is also drawn after the
    update, at the next round's bound: read in its aggregate_train, not replayed here.)"""
    from flwr.serverapp.strategy import DifferentialPrivacyServerSideAdaptiveClipping, FedAvg
    from test_differential_privacy import NORM_TRACE
    flower = DifferentialPrivacyServerSideAdaptiveClipping(FedAvg(), noise_multiplier=0.0, num_sampled_clients=10,
                                                           initial_clipping_norm=1.0, target_clipped_quantile=0.5,
                                                           clip_norm_lr=0.2, clipped_count_stddev=0.0)
    tff, diverged = 1.0, []
    for norms in NORM_TRACE:
        clipped = sum(n > flower.clipping_norm for n in norms)
        flower._geometric_update(flower._noisy_fraction(clipped, len(norms)))
        unclipped = sum(n <= tff for n in norms) / len(norms)
        tff *= np.exp(-0.2 * (unclipped - 0.5))
        diverged.append((flower.clipping_norm, tff))
    all_clipped = [i for i, norms in enumerate(NORM_TRACE) if min(norms) > 1.5]
    assert all_clipped, "the trace must hold a round of only large norms"
    print("bound after each round (Flower, TFF):", diverged)
    assert diverged[-1][0] < 1.0 < diverged[-1][1]
