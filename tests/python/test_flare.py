"""fedagg.flare with real NVIDIA FLARE and real fedagg servers (frameworks_test.sh): FLARE's
FedAvg controller (nvflare.app_common.workflows.fedavg) aggregates the same client results
twice per round, once with its own built-in aggregation and once with
FedaggModelAggregator (results forwarded to a fedagg intermediate, the result read at the
root); both must agree. Also: DIFF results with a row-sparse array, refusals, and the
aggregator's memory, which must not grow with the number of results. Skipped when FLARE is
not installed."""
import os
import tracemalloc

import numpy as np
import pytest

nvflare = pytest.importorskip("nvflare", reason="NVIDIA FLARE is not installed (scripts/setup.sh installs it into "
                                                ".venv-frameworks; tests/python/frameworks_test.sh runs this file)")
from nvflare.apis.fl_constant import FLMetaKey  # noqa: E402
from nvflare.app_common.abstract.fl_model import FLModel, ParamsType  # noqa: E402
from nvflare.app_common.aggregators.weighted_aggregation_helper import WeightedAggregationHelper  # noqa: E402
from nvflare.app_common.workflows.fedavg import FedAvg  # noqa: E402

import fedagg  # noqa: E402
from conftest import quantized_mean_bound  # noqa: E402
from fedagg.flare import FedaggModelAggregator  # noqa: E402
from fedagg.flare.aggregator import result_weight  # noqa: E402

rng = np.random.default_rng(11)


def aggregator(**options):
    return FedaggModelAggregator(os.environ["FEDAGG_TEST_ROOT"],
                                 target=os.environ["FEDAGG_TEST_INTERMEDIATES"].split(",")[0], **options)


def run_round(controller: FedAvg, results, current_round=0) -> FLModel:
    """One round of FLARE's FedAvg, as its run() drives it: reset, the per-result callback
    as each result arrives, then the aggregated result."""
    controller.current_round = current_round
    if controller.aggregator:
        controller.aggregator.reset_stats()
    else:
        controller._aggr_helper = WeightedAggregationHelper(exclude_vars=controller.exclude_vars)
        controller._aggr_metrics_helper = WeightedAggregationHelper()
        controller._all_metrics = True
    controller._received_count, controller._expected_count = 0, len(results)
    controller._params_type, controller._site_metric_weights = None, {}
    for result in results:
        assert controller._aggregate_one_result(result)
    return controller._get_aggregated_result()


def site_results(n, params_type=ParamsType.FULL, current_round=0):
    results = []
    for i in range(n):
        params = {"conv1.weight": rng.normal(size=(8, 3, 3, 3)).astype(np.float32),
                  "fc.bias": rng.normal(size=10),                                  # float64
                  "bn.num_batches_tracked": np.int64(100 + i)}                      # averaged as float64
        meta = {"client_name": f"site-{i + 1}"}
        if i % 3:
            meta[FLMetaKey.NUM_STEPS_CURRENT_ROUND] = 5 * i                         # else: weight 1
        results.append(FLModel(params=params, params_type=params_type, metrics={"accuracy": 0.5 + i / 100},
                               meta=meta, current_round=current_round))
    return results


def test_fedagg_aggregator_equals_flare_fedavg_on_the_same_results():
    weights = {"site-2": 2.0, "site-5": 0.5}
    for current_round in range(2):
        results = site_results(7, current_round=current_round)
        expected = run_round(FedAvg(num_clients=7, aggregation_weights=weights), results, current_round)
        got = run_round(FedAvg(num_clients=7, aggregator=aggregator(aggregation_weights=weights)), results,
                        current_round)
        assert sorted(got.params) == sorted(expected.params)
        for key, value in expected.params.items():
            value = np.asarray(value)
            assert got.params[key].dtype == value.dtype, key
            np.testing.assert_allclose(got.params[key], value, rtol=1e-6, atol=1e-7, err_msg=key)
        assert got.params_type == ParamsType.FULL
        assert got.meta["nr_aggregated"] == 7 and got.meta["fedagg_aggregation_id"].startswith("flare-r")
        assert got.metrics["accuracy"] == pytest.approx(expected.metrics["accuracy"])


def test_quantized_results_stay_within_the_quantization_bound_of_flare_fedavg():
    """encoding="quantized:8": the float arrays travel at 8 bits a coordinate, and each
    coordinate of the mean is within the weighted mean of the results' levels 2 s / 255 (s:
    the largest |value| of its block of 256) of FLARE's own FedAvg; the int64 array stays
    plain and exact. The spec at the root declares the encoding on the float arrays only."""
    weights = {"site-2": 2.0, "site-5": 0.5}
    results = site_results(7)
    expected = run_round(FedAvg(num_clients=7, aggregation_weights=weights), results)
    got = run_round(FedAvg(num_clients=7, aggregator=aggregator(aggregation_weights=weights,
                                                                encoding="quantized:8")), results)
    site_weights = [result_weight(result, weights) for result in results]
    assert sorted(got.params) == sorted(expected.params)
    off = 0.0
    for key in ("conv1.weight", "fc.bias"):
        value = np.asarray(expected.params[key])
        assert got.params[key].dtype == value.dtype, key
        bound = quantized_mean_bound([np.asarray(r.params[key]) for r in results], site_weights, "quantized:8")
        error = np.abs(got.params[key].astype(np.float64) - value.astype(np.float64))
        allowed = bound + 1e-6 * np.abs(value) + 1e-7
        assert np.all(error <= allowed), f"{key}: error {np.max(error / allowed):.3f} x the bound at worst"
        off = max(off, float(np.max(error)))
        print(f"{key}: worst error {np.max(error):.3g}, {np.max(error / allowed):.3f} of the bound")
    assert off > 0, "the quantized mean equals the plain one exactly: was anything quantized?"
    np.testing.assert_allclose(got.params["bn.num_batches_tracked"], expected.params["bn.num_batches_tracked"],
                               rtol=1e-12)
    with fedagg.connect(os.environ["FEDAGG_TEST_ROOT"]) as root:
        leaves = {leaf.path: str(leaf.value_encoding)
                  for leaf in root.control.get(got.meta["fedagg_aggregation_id"]).spec.leaves}
    assert leaves == {"model.conv1_weight": "quantized:8", "model.fc_bias": "quantized:8",
                      "model.bn_num_batches_tracked": "plain", "num_examples": "plain"}, leaves
    # As a FLARE job config gives it: a string; checked when the component is made.
    with pytest.raises(fedagg.FedaggError, match="use a quantized encoding"):
        aggregator(encoding="discretized:16@0.001")
    with pytest.raises(fedagg.FedaggError, match="is not an encoding"):
        aggregator(encoding="8bit")


def test_diff_results_with_a_row_sparse_array():
    """Differences where each site changed a few rows of an embedding: sent as rows, the
    mean over all sites (rows a site did not touch count as zero change) as FLARE's."""
    results = []
    for i in range(5):
        diff = np.zeros((1000, 16), np.float32)
        diff[rng.choice(1000, 20, replace=False)] = rng.normal(size=(20, 16))
        results.append(FLModel(params={"emb": diff, "w": rng.normal(size=4).astype(np.float32)},
                               params_type=ParamsType.DIFF, meta={"client_name": f"site-{i}",
                                                                  FLMetaKey.NUM_STEPS_CURRENT_ROUND: i + 1}))
    expected = run_round(FedAvg(num_clients=5), results)
    got = run_round(FedAvg(num_clients=5, aggregator=aggregator(row_sparse=["emb"])), results)
    assert got.params_type == ParamsType.DIFF
    for key in ("emb", "w"):
        np.testing.assert_allclose(got.params[key], expected.params[key], rtol=1e-5, atol=1e-7, err_msg=key)
    # Full weights cannot be sent as changes without the global model: refused, and said so.
    full = FedaggModelAggregator(os.environ["FEDAGG_TEST_ROOT"], row_sparse=["emb"])
    full.reset_stats()
    full.accept_model(FLModel(params={"emb": np.zeros((4, 2), np.float32)}, params_type=ParamsType.FULL,
                              meta={"client_name": "site-1"}))
    assert "params_type DIFF" in full.failures[-1]
    with pytest.raises(fedagg.FedaggError, match="no result reached fedagg"):
        full.aggregate_model()


def test_a_refused_result_is_left_out_and_quorum_is_fedaggs():
    agg = aggregator(min_contributions=3)
    agg.reset_stats()
    good = site_results(3)
    agg.accept_model(good[0])
    agg.accept_model(FLModel(params={**good[1].params, "fc.bias": np.zeros(3)}, meta={"client_name": "site-bad"}))
    assert "site-bad" in agg.failures[-1] and "INVALID_ARGUMENT" in agg.failures[-1]
    agg.accept_model(good[2])
    with pytest.raises(fedagg.FedaggError, match="FAILED"):   # 2 of the 3 required
        agg.aggregate_model()
    agg.reset_stats()
    for result in good:
        agg.accept_model(result)
    assert agg.aggregate_model().meta["nr_aggregated"] == 3


def peak_during(n, model_elements):
    """tracemalloc's peak while an aggregator accepts n results of a model, each result
    made and dropped as FLARE hands them over one at a time."""
    agg = aggregator()
    agg.reset_stats()
    tracemalloc.start()
    try:
        for i in range(n):
            agg.accept_model(FLModel(params={"w": np.full(model_elements, i, np.float32)},
                                     meta={"client_name": f"site-{i}"}))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    result = agg.aggregate_model()
    np.testing.assert_allclose(result.params["w"], (n - 1) / 2)
    return peak


def test_the_aggregator_holds_one_result_at_a_time():
    model = 1_000_000 * 4
    small, large = peak_during(4, 1_000_000), peak_during(32, 1_000_000)
    assert large < small + model, f"peak {large / 2**20:.1f} MiB for 32 results, {small / 2**20:.1f} MiB for 4"
    assert large < 4 * model


def test_dp_fedavg_on_diff_results_is_the_clipped_mean_plus_noise_of_the_stated_size():
    """privacy= (a job config's dict): DIFF results, each clipped to the bound over all its
    arrays, averaged over the expected sites unweighted, plus noise of sd z C / n on every
    coordinate (about 4,000: six standard errors of the sample sd, 6.7%, is the tolerance)."""
    clip, z, n = 1.0, 2.0, 8
    results = []
    for i in range(n):
        scale = 0.001 if i < 3 else 1.0  # three sites under the bound
        params = {"w": rng.normal(size=(60, 64)).astype(np.float32) * scale, "b": rng.normal(size=16) * scale}
        results.append(FLModel(params=params, params_type=ParamsType.DIFF, meta={"client_name": f"site-{i}"}))
    dp = aggregator(privacy={"clip_norm": clip, "noise_multiplier": z, "expected_clients": n})
    got = run_round(FedAvg(num_clients=n, aggregator=dp), results)
    assert got.params_type == ParamsType.DIFF
    assert got.meta["fedagg_clipped_updates"] == n - 3
    sigma = got.meta["fedagg_noise_stddev"] / n
    assert z * clip / n <= sigma < z * clip / n * (1 + 1e-9)
    clipped = []
    for result in results:
        change = {k: np.asarray(v, np.float64) for k, v in result.params.items()}
        norm = np.sqrt(sum(float(np.sum(c * c)) for c in change.values()))
        clipped.append({k: c * min(1.0, clip / norm) for k, c in change.items()})
    noise = np.concatenate([(np.asarray(got.params[k], np.float64) - sum(c[k] for c in clipped) / n).ravel()
                            for k in ("w", "b")])
    assert abs(noise.mean()) < 6 * sigma / np.sqrt(noise.size)
    assert abs(noise.std() / sigma - 1) < 6 * np.sqrt(0.5 / noise.size), (noise.std(), sigma)
    # Full weights cannot be clipped as changes without the global model: refused, and said so.
    full = aggregator(privacy=fedagg.DifferentialPrivacy(clip_norm=clip, noise_multiplier=z, expected_clients=n))
    full.reset_stats()
    full.accept_model(FLModel(params={"w": np.zeros(4, np.float32)}, params_type=ParamsType.FULL,
                              meta={"client_name": "site-1"}))
    assert "params_type DIFF" in full.failures[-1]
