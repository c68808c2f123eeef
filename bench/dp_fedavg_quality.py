"""DP-FedAvg's model quality through fedagg, beside the same algorithm in NumPy with
TensorFlow Federated's formulas and beside Flower's DP wrapper's code (issue 48's goal:
fedagg within 2 points of accuracy of the NumPy run).

A multinomial logistic regression on scikit-learn's bundled digits (8x8 images, 10
classes; exported to an .npz by bench/dp_fedavg_quality.sh), the training set split over
100 clients, 20 sampled each round (fixed-size, the same clients for every contender),
each client taking a few local gradient steps from the global model. Every round each
contender adds to its own global model:
  fedagg:  the result of a private federated_mean through a live fedagg tree (a root and two
           intermediates): the clients' changes, clipped by fedagg to C where received,
           discrete Gaussian noise of sd z C added once at the root, divided by 20;
  numpy:   sum_i clip(delta_i, C) / 20 + N(0, (z C / 20)^2), TFF's gaussian_fixed formulas;
  flower:  Flower's DifferentialPrivacyServerSideFixedClipping's steps, with its own
           functions (compute_clip_model_update, a FedAvg weighted by examples,
           compute_stdv and add_gaussian_noise_inplace: np.random.normal);
  none:    the plain FedAvg mean, no clipping and no noise (what privacy costs).
z comes from fedagg.privacy_accounting (epsilon 8 at delta 1e-5 after the rounds, fixed-size
sampling, RDP), given on the command line. Prints one line "BENCH {json}" per seed with the
test accuracy of each contender (bench/summary.py compares their medians over the seeds: one
seed's figures differ by a few points from the noise drawn alone).
  dp_fedavg_quality.py --data digits.npz --root HOST:PORT --targets A,B --z Z [--clip C]
                       [--rounds 40] [--seeds 1,2,...,10]
"""
import argparse
import json

import numpy as np

import fedagg
from flwr.supercore.differential_privacy import add_gaussian_noise_inplace, compute_clip_model_update, compute_stdv

CLIENTS, PER_ROUND, CLASSES, LOCAL_STEPS, LEARNING_RATE = 100, 20, 10, 5, 0.5


def split(data, seed):
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(data["y"]))
    x, y = data["x"][order].astype(np.float32) / 16.0, data["y"][order]
    test = len(y) // 5
    parts = np.array_split(np.arange(test, len(y)), CLIENTS)
    return [(x[p], y[p]) for p in parts], (x[:test], y[:test])


def local_change(model, x, y):
    w, b = model["w"].copy(), model["b"].copy()
    onehot = np.eye(CLASSES, dtype=np.float32)[y]
    for _ in range(LOCAL_STEPS):
        logits = x @ w + b
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        grad = (p - onehot) / len(y)
        w -= LEARNING_RATE * x.T @ grad
        b -= LEARNING_RATE * grad.sum(axis=0)
    return {"w": w - model["w"], "b": b - model["b"]}


def accuracy(model, test):
    x, y = test
    return float(np.mean(np.argmax(x @ model["w"] + model["b"], axis=1) == y))


def clipped(change, clip):
    norm = np.sqrt(sum(float(np.sum(v.astype(np.float64) ** 2)) for v in change.values()))
    return {k: v * min(1.0, clip / norm) for k, v in change.items()}


def run(seed, data, conn, targets, z, clip, rounds):
    clients, test = split(data, seed)
    zero = {"w": np.zeros((64, CLASSES), np.float32), "b": np.zeros(CLASSES, np.float32)}
    models = {name: {k: v.copy() for k, v in zero.items()} for name in ("fedagg", "numpy", "flower", "none")}
    sampler, noise = np.random.default_rng(seed + 1000), np.random.default_rng(seed + 2000)
    np.random.seed(seed)  # Flower's add_gaussian_noise_inplace draws from NumPy's global generator
    privacy = fedagg.DifferentialPrivacy(clip_norm=clip, noise_multiplier=z, expected_clients=PER_ROUND)
    sends = [fedagg.connect(t) for t in targets]
    for r in range(rounds):
        chosen = sampler.choice(CLIENTS, PER_ROUND, replace=False)
        # fedagg: the clients' changes through the tree, clipped and noised there.
        status = conn.control.create(f"dp-quality-s{seed}-r{r}", {"w": fedagg.Field("float32", (64, CLASSES),
                                                                                   "federated_mean"),
                                                                "b": fedagg.Field("float32", (CLASSES,),
                                                                                  "federated_mean")},
                                     privacy=privacy, min_contributions=PER_ROUND)
        for i, c in enumerate(chosen):
            sends[i % len(sends)].submit(f"client-{c}", status, local_change(models["fedagg"], *clients[c]))
        conn.control.seal(status.aggregation_id)
        final = conn.control.wait(status.aggregation_id, timeout=60)
        assert final.state == "FINALIZED", final.detail
        result = conn.control.result(status.aggregation_id)
        for k in ("w", "b"):
            models["fedagg"][k] += result[k].values
        # NumPy, TFF's gaussian_fixed: the clipped changes' sum, noised, over the expected count.
        changes = [clipped(local_change(models["numpy"], *clients[c]), clip) for c in chosen]
        for k in ("w", "b"):
            total = sum(ch[k].astype(np.float64) for ch in changes)
            models["numpy"][k] += ((total + noise.normal(0, z * clip, total.shape)) / PER_ROUND).astype(np.float32)
        # Flower: each reply clipped against the global model, FedAvg by examples, noise on the result.
        current = [models["flower"]["w"], models["flower"]["b"]]
        replies, weights = [], []
        for c in chosen:
            change = local_change(models["flower"], *clients[c])
            params = [current[0] + change["w"], current[1] + change["b"]]
            compute_clip_model_update(params, current, clip)
            replies.append(params)
            weights.append(len(clients[c][1]))
        mean = [sum(w * p[i] for w, p in zip(weights, replies)) / sum(weights) for i in range(2)]
        mean = [m.astype(np.float32) for m in mean]
        add_gaussian_noise_inplace(mean, compute_stdv(z, clip, PER_ROUND))
        models["flower"]["w"], models["flower"]["b"] = mean
        # No privacy: FedAvg's plain mean of the changes.
        plain = [local_change(models["none"], *clients[c]) for c in chosen]
        for k in ("w", "b"):
            models["none"][k] += sum(ch[k] for ch in plain) / PER_ROUND
    return {name: accuracy(model, test) for name, model in models.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--targets", required=True)
    parser.add_argument("--z", type=float, required=True)
    parser.add_argument("--epsilon", type=float, default=8.0, help="what --z was calibrated for (reported)")
    parser.add_argument("--clip", type=float, default=0.5)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--seeds", default="1,2,3,4,5,6,7,8,9,10")
    args = parser.parse_args()
    data = dict(np.load(args.data))
    with fedagg.connect(args.root) as conn:
        for seed in (int(s) for s in args.seeds.split(",")):
            accuracies = run(seed, data, conn, args.targets.split(","), args.z, args.clip, args.rounds)
            print("BENCH " + json.dumps({"bench": "dp_quality", "seed": seed, "clients": CLIENTS,
                                         "per_round": PER_ROUND, "rounds": args.rounds, "z": args.z,
                                         "clip": args.clip, "epsilon": args.epsilon, "delta": 1e-5,
                                         "accuracy": accuracies, "checked": True}),
                  flush=True)


if __name__ == "__main__":
    main()
