"""Fixtures of the Python client tests: connections to the servers that
python_client_test.sh started (addresses and credentials come in the environment)."""
import os

import numpy as np
import pytest

import fedagg


@pytest.fixture
def conn():
    with fedagg.connect(os.environ["FEDAGG_TEST_SERVER"]) as connection:
        yield connection


@pytest.fixture
def durable_conn():
    """A connection to a root that writes checkpoints (--checkpoint_dir)."""
    with fedagg.connect(os.environ["FEDAGG_TEST_DURABLE_SERVER"]) as connection:
        yield connection


@pytest.fixture
def secure_env():
    certs = os.environ["FEDAGG_TEST_CERTS"]
    return {
        "target": os.environ["FEDAGG_TEST_SECURE_SERVER"],
        "ca": os.path.join(certs, "ca.pem"),
        "cert": os.path.join(certs, "client.pem"),
        "key": os.path.join(certs, "client.key"),
        "token": os.environ["FEDAGG_TEST_TOKEN"],
    }


@pytest.fixture
def unreachable():
    """A connection to a port nothing listens on: any call that reaches the network fails."""
    with fedagg.connect(f"127.0.0.1:{os.environ['FEDAGG_TEST_UNUSED_PORT']}", timeout=2) as connection:
        yield connection


def finish(conn, aggregation_id):
    """Seals, waits for FINALIZED and returns the result."""
    conn.control.seal(aggregation_id)
    final = conn.control.wait(aggregation_id, timeout=30)
    assert final.state == "FINALIZED", final.detail
    return conn.control.result(aggregation_id)


def quantized_levels(values, encoding):
    """Per coordinate of `values` (in the field's dtype): the level 2 s_k / (2^b - 1) of its
    block in a quantized encoding, and s_k, the smallest float32 at or above the block's
    largest |value| (as the encoder picks it). A decoded coordinate lies within one level."""
    encoding = fedagg.ValueEncoding.of(encoding)
    x = np.asarray(values, np.float64).reshape(-1)
    size = encoding.block_size
    padded = np.zeros(-(-x.size // size) * size)
    padded[:x.size] = np.abs(x)
    largest = padded.reshape(-1, size).max(axis=1)
    s = largest.astype(np.float32)
    low = s.astype(np.float64) < largest
    s[low] = np.nextafter(s[low], np.float32(np.inf))
    s = np.repeat(s.astype(np.float64), size)[:x.size].reshape(np.shape(values))
    return 2.0 * s / encoding.max_code, s


def quantized_mean_bound(updates, weights, encoding):
    """How far, per coordinate, the weighted mean of `updates` sent quantized can be from
    their plain weighted mean: the weighted mean of the updates' levels (each decoded
    coordinate is within one level, whatever the rounding draws), plus 1e-5 of the weighted
    mean of the block scales for the float32 decoding and accumulation. Deterministic."""
    weights = np.asarray(weights, np.float64)
    levels, scales = zip(*(quantized_levels(update, encoding) for update in updates))
    total = weights.sum()
    level = sum(w * l for w, l in zip(weights, levels)) / total
    scale = sum(w * s for w, s in zip(weights, scales)) / total
    return level + 1e-5 * scale
