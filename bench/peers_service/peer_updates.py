"""The updates that every contender of bench/peers_service_bench.sh aggregates, and the check
of its result. Client i sends update i % K of a file of K seeded random float32 vectors,
with weight 1 + i % 7; the aggregate must equal their weighted mean, computed in float64,
to a relative error below TOLERANCE (float32 accumulation of up to 1,000 updates)."""
import numpy as np

TOLERANCE = 1e-5


def weight(client):
    return 1 + client % 7


def write_updates(path, distinct, elements, seed=7):
    rng = np.random.default_rng(seed)
    rng.uniform(-1, 1, size=(distinct, elements)).astype(np.float32).tofile(path)


def load_updates(path, elements):
    """The file's K vectors, mapped (pages are read when a client copies its update)."""
    return np.memmap(path, dtype=np.float32, mode="r").reshape(-1, elements)


def client_update(updates, client):
    """(a fresh array holding client's update, its weight): what a client has to send."""
    return np.array(updates[client % len(updates)]), weight(client)


def reference_mean(updates, clients):
    weights = np.zeros(len(updates))
    for client in range(clients):
        weights[client % len(updates)] += weight(client)
    return (weights @ np.asarray(updates, dtype=np.float64)) / weights.sum()


def relative_error(result, reference):
    result = np.asarray(result, dtype=np.float64).reshape(-1)
    if result.shape != reference.shape:
        return float("inf")
    return float(np.max(np.abs(result - reference)) / max(np.max(np.abs(reference)), 1e-30))
