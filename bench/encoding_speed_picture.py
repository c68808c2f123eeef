#!/usr/bin/env python3
"""Draws the speed of encoded updates (issue 46) from the service table's records: for each
encoded row (scripts/service-table.sh, measure "model"), the bytes a second the bare gRPC
sink took of the encoded updates beside the model bytes a second (as float32) each fedagg
backend took in, medians over the runs given, with the goal (a multiple of the sink's
rate) marked. Reads BENCH lines (bench/service_bench.sh's, in scripts/bench.sh's
service.log) or the JSON lines of service-table.sh --records.
Usage: encoding_speed_picture.py OUT.png FILE...
Needs matplotlib (Debian: python3-matplotlib)."""
import json
import statistics
import sys

GOALS = {"encoded 16 MiB quantized:8": 3.0, "encoded 16 MiB quantized:4": 5.0}


def records(paths):
    for path in paths:
        for line in open(path):
            line = line.strip()
            if line.startswith("BENCH "):
                line = line[len("BENCH "):]
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if r.get("bench", "table") == "table" and r.get("measure") == "model":
                yield r


def main(out, paths):
    rows = {}
    for r in records(paths):
        rows.setdefault(r["workload"], {}).setdefault(r["backend"], []).append(r)
    if not rows:
        print("encoding_speed_picture: no encoded rows in", ", ".join(paths), file=sys.stderr)
        return 1
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    workloads = sorted(rows)
    backends = sorted({b for w in rows.values() for b in w})
    fig, ax = plt.subplots(figsize=(7, 3.4))
    width = 0.8 / (len(backends) + 1)
    for i, workload in enumerate(workloads):
        runs = [r for b in rows[workload].values() for r in b]
        sink = statistics.median(r["sink"] for r in runs) / 1e6
        ax.bar(i, sink, width, color="tab:gray", label="bare gRPC sink (its bytes)" if i == 0 else None)
        for k, backend in enumerate(backends):
            values = [r["value"] / 1e6 for r in rows[workload].get(backend, [])]
            if values:
                ax.bar(i + (k + 1) * width, statistics.median(values), width,
                       color=["tab:blue", "tab:orange", "tab:green"][k % 3],
                       label=f"fedagg {backend} (model bytes)" if i == 0 else None)
        if workload in GOALS:
            ax.hlines(GOALS[workload] * sink, i - width / 2, i + (len(backends) + 0.5) * width, colors="tab:purple",
                      linestyles="--", label="goal" if i == 0 else None)
    ax.set_xticks([i + len(backends) * width / 2 for i in range(len(workloads))])
    ax.set_xticklabels([w.replace("encoded ", "") for w in workloads])
    ax.set_ylabel("MB/s")
    ax.set_title("Encoded updates: model bytes taken in against the sink's bytes (medians)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    print("encoding_speed_picture: wrote", out)
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2:]))
