"""Fixtures of the Python client tests: connections to the servers that
python_client_test.sh started (addresses and credentials come in the environment)."""
import os

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
