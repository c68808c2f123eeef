"""Random aggregations through a tree of fedagg servers, each result checked against NumPy.

Every round draws a value type of one to three fields (any intrinsic, dtype and shape, counts
asked for or not, float64 accumulation or not), one to ten clients whose updates are spread
over the servers given (a root first, then intermediates under it), and the form each field is
given in (its own encoding, or a dense array for a sparse field, or indices for a dense one:
the Python client converts). The root is sealed, and its result compared with a float64
reference computed here from what was sent: exactly for integer sums, max and min, within a
rounding bound of the accumulation dtype otherwise (32 ulps of the sum of magnitudes).
A third of the rounds are deterministic aggregations: their results must equal, to the bit,
the correctly rounded sum (math.fsum) of what each update contributes, divided once in
float64 and rounded to the result dtype, whatever server each update went through.

Usage: random_conformance.py ROOT[,INTERMEDIATE...] SEED ROUNDS
Exits 1 naming every round and field that differed.
"""
import math
import random
import sys
from collections import defaultdict

import numpy as np

import fedagg
from fedagg.update_input import _to_bfloat16_bits

DTYPES = ["float32", "float64", "int32", "int64", "float16", "bfloat16"]
DENSE = ["federated_sum", "federated_mean", "federated_weighted_mean", "federated_max", "federated_min"]
SPARSE = ["sparse_sum", "sparse_sum_sparse", "sparse_mean", "sparse_weighted_mean"]
ROWS = ["row_sparse_sum", "row_sparse_mean"]
SUMS = {"federated_sum", "sparse_sum", "sparse_sum_sparse", "row_sparse_sum"}
WIRE = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64,
        "float16": np.float16, "bfloat16": np.float32}


def rounded(values, dtype):
    """float64 values as the field's dtype holds them (what the client sends)."""
    if dtype == "float16":
        return values.astype(np.float16).astype(np.float64)
    if dtype == "float32":
        return values.astype(np.float32).astype(np.float64)
    if dtype == "bfloat16":
        bits = _to_bfloat16_bits(values.astype(np.float32).reshape(-1)).astype(np.uint32) << 16
        return bits.view(np.float32).astype(np.float64).reshape(values.shape)
    return values


def draw_fields(pr):
    fields = {}
    for f in range(pr.randint(1, 3)):
        intrinsic = pr.choice(DENSE + SPARSE + ROWS)
        rank = pr.choice([1, 2]) if intrinsic in ROWS else pr.choice([0, 1, 2])
        large = pr.random() < 0.15  # large enough for the backends' parallel paths
        shape = tuple(pr.randint(50, 400) if large else pr.randint(1, 6) for _ in range(rank))
        counts = intrinsic in SPARSE + ROWS and pr.random() < 0.5
        fields[f"f{f}"] = fedagg.Field(pr.choice(DTYPES), shape, intrinsic, counts)
    return fields


class Update:
    """One client's update: per field, the COO entries (linear index, float64 value) it
    contributes, and the form it is sent in."""

    def __init__(self, fields, rng, pr, integral):
        self.entries, self.send = {}, {}
        for name, field in fields.items():
            size = int(np.prod(field.shape)) if field.shape else 1

            def values(k):
                drawn = rng.integers(-8, 9, k).astype(np.float64) if integral or field.dtype.startswith("int") \
                    else rng.normal(size=k)
                return rounded(drawn, field.dtype)

            wire = WIRE[field.dtype]
            if field.intrinsic in SPARSE:
                ids = rng.integers(0, size, pr.randint(0, min(2 * size, 5000)))
                vals = values(ids.size)
                if pr.random() < 0.3:  # a dense array: its non-zero elements are sent
                    dense = np.zeros(size)
                    np.add.at(dense, ids, vals)
                    dense = rounded(dense, field.dtype)
                    ids = np.flatnonzero(dense)
                    vals = dense[ids]
                    self.send[name] = dense.reshape(field.shape).astype(wire)
                else:
                    self.send[name] = fedagg.Sparse(ids, vals.astype(wire))
                self.entries[name] = (ids, vals)
            elif field.intrinsic in ROWS:
                width = size // field.shape[0]
                rows = rng.integers(0, field.shape[0], pr.randint(0, min(2 * field.shape[0], 300)))
                table = values(rows.size * width).reshape(rows.size, width)
                if pr.random() < 0.3:  # a dense table: its rows holding a non-zero are sent
                    dense = np.zeros((field.shape[0], width))
                    np.add.at(dense, rows, table)
                    dense = rounded(dense, field.dtype)
                    rows = np.flatnonzero((dense != 0).any(axis=1))
                    table = dense[rows]
                    self.send[name] = dense.reshape(field.shape).astype(wire)
                else:
                    self.send[name] = fedagg.RowSparse(rows, table.reshape((rows.size,) + field.shape[1:]).astype(wire))
                ids = (rows[:, None] * width + np.arange(width)).reshape(-1)
                self.entries[name] = (ids, table.reshape(-1))
            else:
                dense = values(size)
                if pr.random() < 0.3:
                    nz = np.flatnonzero(dense)  # indices: scattered into zeros
                    self.send[name] = fedagg.Sparse(nz, dense[nz].astype(wire))
                else:
                    self.send[name] = dense.reshape(field.shape).astype(wire)
                self.entries[name] = (np.arange(size), dense)


def expected(field, updates, weights):
    """The field's result in float64 from each update's (ids, values) entries: (values, the
    same reduction of the values' magnitudes, per-coordinate counts)."""
    size = int(np.prod(field.shape)) if field.shape else 1
    weighted = "weighted" in field.intrinsic
    total, magnitude = np.zeros(size), np.zeros(size)
    weight_sum, counts = np.zeros(size), np.zeros(size, np.int64)
    extreme = None
    for (ids, vals), weight in zip(updates, weights):
        w = weight if weighted else 1.0
        np.add.at(total, ids, vals * w)
        np.add.at(magnitude, ids, np.abs(vals * w))
        touched = np.zeros(size, bool)
        touched[ids] = True
        counts += touched
        weight_sum += touched * (weight if weight is not None else 1.0)
        if field.intrinsic in ("federated_max", "federated_min"):
            pick = np.maximum if field.intrinsic == "federated_max" else np.minimum
            extreme = vals.copy() if extreme is None else pick(extreme, vals)
    n = len(updates)
    divide = {
        "federated_mean": lambda x: x / n,
        "federated_weighted_mean": lambda x: x / sum(weights),
        "sparse_mean": lambda x: np.where(counts > 0, x / np.maximum(counts, 1), 0),
        "row_sparse_mean": lambda x: np.where(counts > 0, x / np.maximum(counts, 1), 0),
        "sparse_weighted_mean": lambda x: np.where(counts > 0, x / np.where(weight_sum > 0, weight_sum, 1), 0),
    }.get(field.intrinsic, lambda x: x)
    if extreme is not None:
        return extreme, np.abs(extreme), counts
    return divide(total), divide(magnitude), counts


def deterministic_expected(field, f64, updates, weights):
    """A deterministic aggregation's result, per coordinate (None where no update touched
    it): the exact sum of the contributions (value times weight, in float64, for weighted
    intrinsics) rounded to float64, divided in float64 for the means, then rounded to the
    result dtype."""
    size = int(np.prod(field.shape)) if field.shape else 1
    weighted = "weighted" in field.intrinsic
    contributions, coordinate_weights = defaultdict(list), defaultdict(list)
    for (ids, vals), weight in zip(updates, weights):
        w = weight if weighted else 1.0
        for i, v in zip(ids.tolist(), vals.tolist()):
            contributions[i].append(v * w if weighted else v)
        for i in set(ids.tolist()):
            coordinate_weights[i].append(w)
    narrow = not (f64 or field.dtype == "float64" or field.dtype.startswith("int"))
    out = [None] * size
    for i in range(size):
        if i not in contributions and field.intrinsic not in DENSE:
            continue
        total = math.fsum(contributions.get(i, []))
        if field.intrinsic == "federated_mean":
            total /= len(updates)
        elif field.intrinsic == "federated_weighted_mean":
            total /= math.fsum(weights)
        elif field.intrinsic in ("sparse_mean", "row_sparse_mean"):
            total /= len(coordinate_weights[i])
        elif field.intrinsic == "sparse_weighted_mean":
            total /= math.fsum(coordinate_weights[i])
        out[i] = float(np.float32(total)) if narrow else total
    return out


def check_deterministic(name, field, f64, updates, weights, got):
    """Problems with a deterministic aggregation's field, as strings: any bit that differs."""
    if field.dtype.startswith("int") and "weighted" not in field.intrinsic or \
            field.intrinsic in ("federated_max", "federated_min"):
        return check(name, field, f64, updates, weights, got)  # exact without the option
    want = deterministic_expected(field, f64, [u.entries[name] for u in updates], weights)
    if field.intrinsic == "sparse_sum_sparse":
        touched = [i for i, v in enumerate(want) if v is not None]
        if got.indices.tolist() != touched:
            return [f"indices {got.indices.tolist()} != {touched}"]
        want = [want[i] for i in touched]
    else:
        want = [0.0 if v is None else v for v in want]
    result = got.values.astype(np.float64).reshape(-1).tolist()
    bad = [i for i, (a, b) in enumerate(zip(result, want)) if a != b]
    if len(result) != len(want) or bad:
        return [f"values at {bad[:5]}: {[result[i] for i in bad[:5]]} != {[want[i] for i in bad[:5]]} (bitwise)"]
    return []


def check(name, field, f64, updates, weights, got):
    """Problems with `got` (a FieldResult), as strings."""
    values, magnitude, counts = expected(field, [u.entries[name] for u in updates], weights)
    problems = []
    size = values.size
    row_width = size // field.shape[0] if field.intrinsic in ROWS and field.shape[0] else 1
    if field.intrinsic == "sparse_sum_sparse":
        touched = np.flatnonzero(counts)
        if not np.array_equal(got.indices, touched):
            return [f"indices {got.indices.tolist()} != {touched.tolist()}"]
        values, magnitude, counts = values[touched], magnitude[touched], counts[touched]
        result = got.values.astype(np.float64)
    else:
        if got.values.shape != tuple(field.shape):
            problems.append(f"shape {got.values.shape} != {field.shape}")
        result = got.values.astype(np.float64).reshape(-1)
        if field.intrinsic in ROWS:
            counts = counts.reshape(-1, row_width)[:, 0] if row_width else np.zeros(field.shape[0], np.int64)
    if field.report_counts and not np.array_equal(np.asarray(got.counts).reshape(-1), counts):
        problems.append(f"counts {np.asarray(got.counts).reshape(-1).tolist()} != {counts.tolist()}")
    exact = field.dtype.startswith("int") and (field.intrinsic in SUMS or field.intrinsic.startswith("federated_m"))
    exact = exact or field.intrinsic in ("federated_max", "federated_min")
    wide = f64 or field.dtype == "float64" or field.dtype.startswith("int")  # accumulated in float64
    ulp = 0 if exact else 2.0 ** (-52 if wide else -23)
    bound = 32 * ulp * (magnitude + np.abs(values))
    bad = np.flatnonzero(~(np.abs(result - values) <= bound))
    if bad.size:
        problems.append(f"values at {bad[:5].tolist()}: {result[bad[:5]].tolist()} != {values[bad[:5]].tolist()}")
    return problems


def run(addresses, seed, rounds):
    connections = [fedagg.connect(address) for address in addresses]
    root = connections[0]
    failures = []
    for r in range(rounds):
        pr, rng = random.Random(seed * 100003 + r), np.random.default_rng(seed * 100003 + r)
        fields = draw_fields(pr)
        f64 = pr.random() < 0.3
        deterministic = pr.random() < 0.33
        weighted = any("weighted" in f.intrinsic for f in fields.values())
        aggregation_id = f"random-{seed}-{r}"
        status = root.control.create(aggregation_id, fields, min_contributions=1, float64_accumulation=f64,
                                     deterministic=deterministic)
        integral = pr.random() < 0.5
        updates = [Update(fields, rng, pr, integral) for _ in range(pr.randint(1, 10))]
        weights = [(float(rng.integers(1, 5)) if pr.random() < 0.5 else float(rng.uniform(0.1, 3))) if weighted
                   else None for _ in updates]
        try:
            for c, (update, weight) in enumerate(zip(updates, weights)):
                connections[c % len(connections)].submit(f"client-{c}", status, update.send, weight=weight)
            root.control.seal(aggregation_id)
            final = root.control.wait(aggregation_id, timeout=60)
            if final.state != "FINALIZED":
                failures.append(f"{aggregation_id} {fields}: {final.state} {final.detail}")
                continue
            result = root.control.result(aggregation_id)
        except fedagg.FedaggError as error:
            failures.append(f"{aggregation_id} {fields}: {error}")
            continue
        if result.contributions != len(updates):
            failures.append(f"{aggregation_id}: {result.contributions} contributions, {len(updates)} sent")
        if deterministic and weighted and result.weight_sum != math.fsum(weights):
            failures.append(f"{aggregation_id}: weight sum {result.weight_sum!r} != {math.fsum(weights)!r}")
        checker = check_deterministic if deterministic else check
        for name, field in fields.items():
            for problem in checker(name, field, f64, updates, weights, result[name]):
                options = (" float64" if f64 else "") + (" deterministic" if deterministic else "")
                failures.append(f"{aggregation_id} {name} {field}{options}: {problem}")
    return failures


if __name__ == "__main__":
    addresses, seed, rounds = sys.argv[1].split(","), int(sys.argv[2]), int(sys.argv[3])
    failures = run(addresses, seed, rounds)
    for failure in failures:
        print("MISMATCH", failure)
    print(f"{rounds} random aggregations (seed {seed}) over {len(addresses)} servers: {len(failures)} mismatches")
    sys.exit(1 if failures else 0)
