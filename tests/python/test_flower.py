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
import re
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
from fedagg.model_layout import ModelLayout, SecureDiscretization  # noqa: E402

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


SECURE_BITS, SECURE_CLIP, SECURE_MAX_WEIGHT, SECURE_CLIENTS = 16, 0.25, 40.0, 6


def updates_by_partition(dump, server_round):
    """The updates clients trained in a round, partition -> (arrays, num_examples)."""
    updates = {}
    for path in glob.glob(os.path.join(dump, f"update-r{server_round}-p*.npz")):
        update = np.load(path)
        partition = int(os.path.basename(path)[:-len(".npz")].rsplit("-p", 1)[1])
        updates[partition] = ({k: update[k] for k in update.files if k != "num_examples"}, int(update["num_examples"]))
    return updates


def weighted_mean(updates, clip=None, max_weight=None):
    """NumPy, in float64: sum_i w_i x_i / sum_i w_i over (arrays, num_examples) pairs, each
    value clipped to [-clip, clip] and each weight capped at max_weight when given."""
    weights = np.array([n if max_weight is None else min(n, max_weight) for _, n in updates], np.float64)
    mean = {}
    for key in updates[0][0]:
        values = [a[key].astype(np.float64) for a, _ in updates]
        if clip is not None:
            values = [np.clip(v, -clip, clip) for v in values]
        mean[key] = sum(w * v for w, v in zip(weights, values)) / weights.sum()
    return mean, float(weights.sum())


def failed_partitions(fedagg_report):
    """The partitions whose replies were failures (their client ids are partition-<p>)."""
    return {int(re.search(r"partition-(\d+)", failure).group(1)) for failure in fedagg_report["failures"]}


def test_secure_rounds_are_numpys_weighted_mean_of_the_clipped_arrays_within_the_bound(tmp_path):
    """FedaggFedAvg(secure=..., secure_bits=16, clip_range=0.25, max_weight=40,
    max_clients=6): 6 clients in two cohorts of 3 (one at each intermediate) mask their
    clipped, weighted, discretized arrays. Each round that finalizes must be NumPy's
    weighted mean of the clipped arrays of the clients counted (weights min(num_examples,
    40)) to within the documented bound n c max_weight / sum(weights), c = clip /
    ((2^15 - 1) // 6 - 1), plus half a unit in the last place of the array's dtype; and not
    plain FedAvg (values beyond the clip range and a client above max_weight make that
    differ by more than the bound). Round 2: a client leaves before sharing its keys, so
    its cohort is too small to go on (its two others are told UNAVAILABLE) and the round is
    the mean of the other cohort. Round 3: a client leaves before unmasking, so its cohort
    keeps fewer shares of the others' secrets than the threshold (2 of 2 neighbours): the
    round fails, the model stays as it was and the root's reason is reported."""
    dump = tmp_path / "dump"
    dump.mkdir()
    dropouts = {(2, 2): "before_sharing", (4, 3): "before_unmasking"}
    report = run_app(tmp_path, "secure", "--clients", SECURE_CLIENTS, "--rounds", 3, "--dump", dump,
                     "--secure", f"{SECURE_BITS},{SECURE_CLIP},{SECURE_MAX_WEIGHT}",
                     # Every ClientApp at once (a cohort forms once its 3 clients advertised): the
                     # Ray cluster frameworks_test.sh starts has 2 CPUs, and Flower's simulation
                     # runs at most CPUs + 4 = 6 ClientApps at a time on this 2-core machine.
                     "--client_cpus", 2 / 8, "--stage_timeout_ms", 60000,
                     "--secure_dropout", ",".join(f"{p}:{r}:{stage}" for (p, r), stage in dropouts.items()))
    assert [r["round"] for r in report["rounds"]] == [1, 2, 3]
    step = SECURE_CLIP / ((2 ** (SECURE_BITS - 1) - 1) // SECURE_CLIENTS - 1)
    start = np.load(dump / "global-r0.npz")
    for entry in report["rounds"][:2]:
        server_round, fedagg_report = entry["round"], entry["fedagg"]
        updates = updates_by_partition(dump, server_round)
        assert sorted(updates) == list(range(SECURE_CLIENTS))
        assert fedagg_report["state"] == "FINALIZED", fedagg_report
        failed = failed_partitions(fedagg_report)
        if server_round == 2:
            # The one that left (CANCELLED, locally) and the two others of its cohort.
            assert 2 in failed and len(failed) == 3, fedagg_report["failures"]
            assert sum("CANCELLED" in f for f in fedagg_report["failures"]) == 1
            assert sum("UNAVAILABLE" in f for f in fedagg_report["failures"]) == 2, fedagg_report["failures"]
        else:
            assert failed == set(), fedagg_report["failures"]
        counted = [updates[p] for p in sorted(updates) if p not in failed]
        assert fedagg_report["contributions"] == fedagg_report["replies"] == len(counted)
        expected, weight_sum = weighted_mean(counted, SECURE_CLIP, SECURE_MAX_WEIGHT)
        assert fedagg_report["num_examples"] == weight_sum
        bound = len(counted) * step * SECURE_MAX_WEIGHT / weight_sum
        assert fedagg_report["error_bound"] == pytest.approx(bound, rel=1e-12)
        got = np.load(dump / f"global-r{server_round}.npz")
        assert sorted(got.files) == sorted(expected)
        worst, off_plain = 0.0, 0.0
        plain, _ = weighted_mean(counted)  # Flower's FedAvg: no clipping, no cap on the weights
        for key, value in expected.items():
            assert got[key].dtype == start[key].dtype, key
            half_ulp = np.finfo(got[key].dtype).eps / 2 * np.abs(value)
            error = np.abs(got[key].astype(np.float64) - value)
            allowed = bound * (1 + 1e-9) + half_ulp
            assert np.all(error <= allowed), (
                f"round {server_round} {key}: error {np.max(error / allowed):.3f} x the bound at worst")
            worst = max(worst, float(np.max(error / allowed)))
            off_plain = max(off_plain, float(np.max(np.abs(got[key].astype(np.float64) - plain[key]) - allowed)))
        print(f"round {server_round}: {len(counted)} clients, bound {bound:.3g}, worst error {worst:.3f} of it")
        assert worst > 0.01, "the secure model equals the exact mean: was anything discretized?"
        assert off_plain > 0, "the clip range and max_weight changed nothing: the test cannot tell them apart"
    third = report["rounds"][2]["fedagg"]
    assert third["state"] == "FAILED" and "dropped out" in third["detail"], third
    assert failed_partitions(third) == {4} and "CANCELLED" in third["failures"][0], third["failures"]
    before, after = np.load(dump / "global-r2.npz"), np.load(dump / "global-r3.npz")
    for key in before.files:
        np.testing.assert_array_equal(after[key], before[key])
    # The root holds a secure aggregation of dense discretized sums of one bit width, cohorts of 3.
    with fedagg.connect(os.environ["FEDAGG_TEST_ROOT"]) as root:
        spec = root.control.get(report["rounds"][0]["fedagg"]["aggregation_id"]).spec
    assert spec.secure is not None and spec.secure.max_cohort == 3 and spec.max_contributions == SECURE_CLIENTS
    assert {(leaf.intrinsic, leaf.value_encoding.kind, leaf.value_encoding.bits) for leaf in spec.leaves} == {
        ("federated_sum", "discretized", SECURE_BITS)}
    assert {leaf.value_encoding.scale for leaf in spec.leaves if leaf.path != "num_examples"} == {step}


def test_secure_parameters_that_could_overflow_are_refused():
    """FedaggFedAvg(secure=...) refuses, when it is made, parameters under which the sum of
    max_clients clients could leave the signed secure_bits-bit range (ValueError saying what
    to change), at the exact edge of the documented rule; what it accepts keeps the worst
    case (every value at +-clip_range or beyond, every weight at max_weight or above) within
    that range, through the client's own encoder."""
    secure = fedagg.SecureAggregation()

    def make(**options):
        strategy = fedagg.flower.FedaggFedAvg("127.0.0.1:1", secure=secure, **options)
        strategy.connection.close()
        return strategy

    # The weights: 8 clients x 4095 examples fit in 2^15 - 1 = 32767, 8 x 4096 do not.
    make(secure_bits=16, max_clients=8, max_weight=4095)
    with pytest.raises(ValueError, match="lower max_weight"):
        make(secure_bits=16, max_clients=8, max_weight=4096)
    with pytest.raises(ValueError, match="lower max_weight"):
        make(secure_bits=16, max_clients=100)  # Flower's default max_weight 1000 needs 32 bits for 100 clients
    # The values: a client needs at least one step a side plus one for rounding:
    # 127 // 63 - 1 = 1, 127 // 64 - 1 = 0.
    make(secure_bits=8, max_clients=63, max_weight=2)
    with pytest.raises(ValueError, match="cannot hold the sum of max_clients=64"):
        make(secure_bits=8, max_clients=64, max_weight=1)
    with pytest.raises(ValueError, match="give max_clients"):
        make()
    with pytest.raises(ValueError, match="8, 16 or 32"):
        make(secure_bits=12, max_clients=8)
    with pytest.raises(ValueError, match="clip_range must be finite and > 0"):
        make(clip_range=0.0, max_clients=8)
    with pytest.raises(ValueError, match="max_weight must be finite and > 0"):
        make(max_weight=float("inf"), max_clients=8)
    with pytest.raises(ValueError, match="below min_cohort=3"):
        make(max_clients=2)
    with pytest.raises(ValueError, match="every array is sent dense"):
        make(max_clients=8, row_sparse=["embedding"])
    with pytest.raises(ValueError, match="not both"):
        make(max_clients=8, privacy=fedagg.DifferentialPrivacy(clip_norm=1, noise_multiplier=1, expected_clients=8))
    with pytest.raises(ValueError, match="leave encoding plain"):
        make(max_clients=8, encoding="quantized:8")
    # Integer arrays would be clipped and discretized beyond repair: refused by the layout.
    discretization = make(secure_bits=16, max_clients=8, max_weight=4095, clip_range=0.25).secure_discretization
    with pytest.raises(fedagg.FedaggError, match="is int64"):
        ModelLayout.from_arrays({"w": np.zeros(3, np.float32), "steps": np.int64(7)}, secure=discretization)

    # The worst case of what was accepted, through the client's encoder: |sum| <= 2^15 - 1.
    arrays = {"w": np.array([0.25, -0.25, 1e6, -1e6, np.nextafter(np.float32(0.25), np.float32(1)), 0.1], np.float32),
              "b": np.array([0.25, -0.25], np.float64)}
    layout = ModelLayout.from_arrays(arrays, secure=discretization)
    spec = fedagg.Spec(layout.spec("edge", secure=secure))
    back = ModelLayout.from_spec(spec, list(arrays), discretization)
    top = 2 ** 15 - 1
    for n in (4095, 10 ** 9):
        fields, weight = back.update(arrays, n)
        assert weight is None and float(fields["num_examples"]) == 4095
        np.testing.assert_allclose(fields["model"]["w"], [0.25, -0.25, 0.25, -0.25, 0.25, 0.1])
        # A value's stochastic rounding gives floor(v / c) or one more: the largest either
        # way, times 8, is in range; the weight is a whole number of its steps, sent exactly.
        weight_steps = float(fields["num_examples"]) / spec.leaves[-1].value_encoding.scale
        assert spec.leaves[-1].path == "num_examples" and weight_steps == int(weight_steps)
        assert 8 * weight_steps <= top
        for leaf in spec.leaves[:-1]:
            steps = np.abs(fields["model"][leaf.path[len("model."):]]) / leaf.value_encoding.scale
            assert 8 * (int(np.max(np.floor(steps))) + 1) <= top, (leaf.path, np.max(steps))
        for seed in range(20):
            prepared = fedagg.prepare_update(spec, fields, seed=seed)
            integers = [np.frombuffer(f.values, "<i2").astype(np.int64) for f in prepared.fields]
            assert all(8 * int(np.max(np.abs(q))) <= top for q in integers), [np.max(np.abs(q)) for q in integers]
    # A client told another discretization than its spec's refuses the round.
    with pytest.raises(fedagg.FedaggError, match="declares federated_sum"):
        ModelLayout.from_spec(spec, list(arrays), SecureDiscretization(16, 0.5, 4095, 8))
    with pytest.raises(fedagg.FedaggError, match="not finite"):
        back.update(dict(arrays, b=np.array([np.nan, 0.0])), 3)
