"""Differential privacy end to end through the Python package and live servers: updates
clipped by the server, the noise's standard deviation as reported (a statistical check whose
false-alarm rate is below 1e-8: six standard deviations), a mean divided by the expected
clients, adaptive clipping's next bound, a checkpointed root publishing its noised result
once a checkpoint holds it, and bad privacy specs refused with INVALID_ARGUMENT."""
import math

import numpy as np
import pytest

import fedagg
from conftest import finish

F = fedagg.Field
rng = np.random.default_rng(48)


def clipped(update, bound):
    norm = float(np.linalg.norm(update.astype(np.float64)))
    return update.astype(np.float64) * min(1.0, bound / norm)


def run_round(conn, aggregation_id, privacy, updates):
    status = conn.control.create(aggregation_id, F("float32", (len(updates[0]),), "federated_mean"),
                                 privacy=privacy, min_contributions=1)
    for i, update in enumerate(updates):
        assert conn.submit(f"client-{i}", status, update) == i + 1
    return finish(conn, aggregation_id), conn.control.get(aggregation_id)


@pytest.mark.parametrize("durable", [False, True])
def test_a_private_mean_is_clipped_noised_once_and_divided_by_the_expected_clients(conn, durable_conn, durable):
    server = durable_conn if durable else conn
    d, clients, bound = 20000, 8, 0.5
    privacy = fedagg.DifferentialPrivacy(clip_norm=bound, noise_multiplier=2.0, expected_clients=10)
    # Norms about 141, all clipped, but the first: about 0.14, under the bound.
    updates = [rng.normal(size=d).astype(np.float32) * (0.001 if i == 0 else 1.0) for i in range(clients)]
    result, status = run_round(server, f"py-dp-{int(durable)}", privacy, updates)
    report = status.privacy
    assert report is not None and report.clip_norm == bound
    assert report.clipped_updates == clients - 1
    sigma = 2.0 * bound
    assert sigma <= report.noise_stddev < sigma * (1 + 1e-9)
    noise = result["value"].values.astype(np.float64) * 10 - sum(clipped(u, bound) for u in updates)
    # 20,000 coordinates: the mean's sd is sigma/141, the sample sd's relative sd 0.5%.
    assert abs(noise.mean()) < 6 * sigma / math.sqrt(d)
    assert abs(noise.std() / sigma - 1) < 6 * math.sqrt(0.5 / d)


def test_adaptive_clipping_reports_the_next_bound(conn):
    privacy = fedagg.DifferentialPrivacy(clip_norm=1.0, noise_multiplier=1.0, expected_clients=20,
                                         adaptive=fedagg.AdaptiveClipping(target_quantile=0.5, learning_rate=0.2))
    updates = [np.full(16, 1.0 if i < 15 else 0.01, np.float32) for i in range(20)]  # norms 4 (clipped) or 0.04
    _, status = run_round(conn, "py-dp-adaptive", privacy, updates)
    report = status.privacy
    assert report.clipped_updates == 15
    # 5 of 20 unclipped, the count noised with sd 0.05 * 20 = 1: the fraction is 0.25 +- 6/20.
    assert abs(report.unclipped_fraction - 0.25) < 6 * 1.0 / 20
    assert report.next_clip_norm == pytest.approx(math.exp(-0.2 * (report.unclipped_fraction - 0.5)), rel=1e-12)
    assert privacy.after(report).clip_norm == report.next_clip_norm


@pytest.mark.parametrize("privacy, words", [
    (fedagg.DifferentialPrivacy(clip_norm=1.0, noise_multiplier=-1.0, expected_clients=10), "noise_multiplier"),
    (fedagg.DifferentialPrivacy(clip_norm=0.0, noise_multiplier=1.0, expected_clients=10), "clip_norm"),
    (fedagg.DifferentialPrivacy(clip_norm=1.0, noise_multiplier=1.0, expected_clients=10,
                                adaptive=fedagg.AdaptiveClipping(target_quantile=1.5)), "target_quantile"),
    (fedagg.DifferentialPrivacy(clip_norm=1.0, noise_multiplier=1.0), "expected_clients"),
])
def test_bad_privacy_specs_are_refused_at_creation(conn, privacy, words):
    with pytest.raises(fedagg.FedaggError) as refused:
        conn.control.create("py-dp-bad", F("float32", (4,), "federated_mean"), privacy=privacy)
    assert refused.value.code_name == "INVALID_ARGUMENT" and words in refused.value.message


def test_a_discretized_private_update_is_clipped_by_the_client_before_it_is_discretized(conn):
    """The server refuses a discretized update beyond the bound plus the rounding's slack:
    the Python client scales the whole update to the bound before discretizing it (here a
    norm of about 45 against a bound of 1, and a slack of 0.001 * sqrt(2000) = 0.045)."""
    privacy = fedagg.DifferentialPrivacy(clip_norm=1.0, noise_multiplier=0.0, expected_clients=3)
    status = conn.control.create("py-dp-discretized", {
        "w": F("float32", (2000,), "federated_sum", encoding="discretized:16@0.001"),
        "b": F("float64", (10,), "federated_mean")}, privacy=privacy, min_contributions=3)
    updates = [{"w": rng.normal(size=2000).astype(np.float32), "b": rng.normal(size=10)} for _ in range(3)]
    for i, update in enumerate(updates):
        assert conn.submit(f"d-{i}", status, update) == i + 1
    result = finish(conn, "py-dp-discretized")
    # No noise (z = 0): the sums of the updates scaled below norm 1 by the rounding's margin,
    # within the steps' rounding (a step a coordinate and client, two when the server had to
    # truncate an update the rounding took past the bound).
    margin = fedagg.update_input.discretized_clip_margin(1.0, [(0.001, 2000)])
    expected_w, expected_b = 0, 0
    for u in updates:
        factor = (1 - 2.0 ** -20 - margin) / math.sqrt(float(np.sum(u["w"].astype(np.float64) ** 2)) +
                                                       float(np.sum(u["b"] ** 2)))
        expected_w, expected_b = expected_w + u["w"] * factor, expected_b + u["b"] * factor
    np.testing.assert_allclose(result["w"].values, expected_w, atol=2 * 3 * 0.001)
    np.testing.assert_allclose(result["b"].values, expected_b / 3, rtol=1e-3, atol=1e-6)
    assert conn.control.get("py-dp-discretized").privacy.clipped_updates <= 1  # the rounding rarely passes C


# A trace of update norms, round by round (10 clients each): replayed through fedagg's
# adaptive clipping here, and through Flower's on the same trace in test_flower.py.
NORM_TRACE = [[0.5 * (1 + i) for i in range(10)], [2.0] * 10, [0.05 * (1 + i) for i in range(10)],
              [1.0, 3.0] * 5, [10.0] * 10]


def test_adaptive_clipping_on_a_replayed_norm_trace_follows_tffs_rule(conn):
    """Each round's next bound is C exp(-lr (b - q)) of the unclipped fraction b the root
    reports (to 1e-9 relative), b is the true unclipped fraction within the count noise's six
    standard deviations, and the next round's spec carries the bound (DifferentialPrivacy.after)."""
    privacy = fedagg.DifferentialPrivacy(clip_norm=1.0, noise_multiplier=1.0, expected_clients=10,
                                         adaptive=fedagg.AdaptiveClipping(target_quantile=0.5, learning_rate=0.2,
                                                                          count_stddev=0.6))
    for r, norms in enumerate(NORM_TRACE):
        unit = np.zeros(8, np.float64)
        unit[0] = 1.0
        _, status = run_round(conn, f"py-dp-trace-{r}", privacy, [np.float32(unit * n) for n in norms])
        report = status.privacy
        # A norm at the bound counts as clipped: the node clips from C (1 - 2^-24) up.
        unclipped = sum(n <= privacy.clip_norm * (1 - 2 ** -24) for n in norms) / len(norms)
        assert abs(report.unclipped_fraction - unclipped) <= 6 * 0.6 / 10  # clamping to [0, 1] only moves it closer
        expected = privacy.clip_norm * math.exp(-0.2 * (report.unclipped_fraction - 0.5))
        assert report.next_clip_norm == pytest.approx(expected, rel=1e-9)
        assert report.clipped_updates == round(len(norms) * (1 - unclipped))
        privacy = privacy.after(report)


def test_a_fields_own_bound_is_applied_before_the_whole_updates(conn):
    """Field(clip_norm=...): field a (own bound 0.5) of an update of norm 3 in a and 4 in b
    is first held to 0.5, then the whole update (norm sqrt(0.25 + 16)) to the bound 2."""
    privacy = fedagg.DifferentialPrivacy(clip_norm=2.0, noise_multiplier=0.0, expected_clients=1)
    status = conn.control.create("py-dp-field-bound", {"a": F("float64", (2,), "federated_sum", clip_norm=0.5),
                                                       "b": F("float64", (1,), "federated_sum")},
                                 privacy=privacy, min_contributions=1)
    conn.submit("c", status, {"a": np.float64([3, 0]), "b": np.float64([4])})
    result = finish(conn, "py-dp-field-bound")
    whole = 2.0 / math.sqrt(0.25 + 16)
    np.testing.assert_allclose(result["a"].values, [0.5 * whole, 0], rtol=1e-6)
    np.testing.assert_allclose(result["b"].values, [4 * whole], rtol=1e-6)
