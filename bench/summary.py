#!/usr/bin/env python3
"""Prints scripts/bench.sh's one summary table: the core reduction against the memory
bandwidth baseline (Google Benchmark's JSON output), then the service benchmarks' BENCH
lines (bench/service_bench.sh, bench/peers_bench.py), each figure beside its goal and
whether it was met. Repeated runs of one case are reported as median [min-max].
Usage: summary.py CORE_JSON SERVICE_LOG"""
import json
import statistics
import sys

MB = 1e6
MIB = 1 << 20


# Goals of the core reduction, as fractions of the bandwidth baseline (issue 14).
CORE_GOALS = {"DenseSum/": 0.80, "SparseSum/8": 0.25, "SparseMean/8": 0.25,
              "SparseSumSparse/8": 0.15, "RowSparseSum/8": 0.60}


def core_goal(short):
    """The goal of a core benchmark (its name without BM_), or None when it is only reported."""
    for prefix, goal in CORE_GOALS.items():
        if short.startswith(prefix) and (prefix.endswith("/") or short == prefix):
            return goal
    return None


def core_rows(path):
    """One row per core benchmark: its median GB/s against the bandwidth baseline of its
    batch size, and for the sparse family against the scatter baseline too (a plain
    scatter of the COO batch)."""
    try:
        runs = json.load(open(path))["benchmarks"]
    except (OSError, ValueError, KeyError):
        return [("core reduction", "not run", "", "")]
    median = {b["run_name"].replace("/real_time", ""): b["bytes_per_second"] for b in runs
              if b.get("aggregate_name") == "median" and "bytes_per_second" in b}
    fallback = median.get("BM_BandwidthBaseline/8")
    scatter = median.get("BM_ScatterBaseline/8")
    rows = []
    for name, rate in median.items():
        if fallback is None or name.startswith("BM_BandwidthBaseline"):
            continue
        # The baseline of the row's own batch size (a batch of 8 fits a large L3 cache that
        # one of 16 does not), else that of 8 updates.
        base = median.get("BM_BandwidthBaseline/" + name.rsplit("/", 1)[-1], fallback)
        short = name.replace("BM_", "")
        figure = f"{rate / 1e9:.2f} GB/s = {100 * rate / base:.0f}% of bandwidth baseline"
        if "Sparse" in short and scatter:
            figure += f", {100 * rate / scatter:.0f}% of scatter baseline ({scatter / 1e9:.2f} GB/s)"
        goal = core_goal(short)
        rows.append((f"core {short}", figure,
                     f">= {100 * goal:.0f}% of baseline" if goal else "(reported)",
                     ("yes" if rate >= goal * base else "NO") if goal else ""))
    return rows


def spread(records, key, scale=1.0, fmt="{:.1f}"):
    """Median of `key` over repeated runs, with [min-max] when there was more than one."""
    values = sorted(r[key] * scale for r in records)
    text = fmt.format(statistics.median(values))
    return text if len(values) == 1 else f"{text} [{fmt.format(values[0])}-{fmt.format(values[-1])}]"


def flags_note(record):
    """The root's flags beyond its defaults (bench/service_bench.sh --root_flags), if any."""
    return f", root {record['root_flags']}" if record.get("root_flags") else ""


def grouped(path):
    """BENCH records of repeated runs, grouped by what they measured (in first-seen order)."""
    groups = {}
    for line in open(path):
        if line.startswith("BENCH "):
            r = json.loads(line[len("BENCH "):])
            key = (r["bench"], r.get("server"), r.get("threads"), r.get("size"), r.get("clients"), r.get("updates") if r["bench"] == "memory" else None,
                   r.get("streams"), r.get("batch_max_mib"), r.get("contender"), r.get("root_flags"),
                   r.get("workload"), r.get("backend"), r.get("encoding"))
            groups.setdefault(key, []).append(r)
    return groups.values()


def service_rows(path):
    groups = list(grouped(path))
    rows = []
    for runs in groups:
        r = runs[0]
        checked = all(x["checked"] for x in runs)
        failed = "" if checked else " (RESULT CHECK FAILED)"
        n = f"{len(runs)} run(s)"
        if r["bench"] == "ingest":
            goal = r["size"] != "1k"
            ratio = statistics.median(x["ratio"] for x in runs)
            figure = (f"fedagg {spread(runs, 'fedagg_bytes_per_s', 1 / MB)} MB/s, "
                      f"{spread(runs, 'fedagg_updates_per_s', fmt='{:.0f}')} upd/s; "
                      f"sink {spread(runs, 'sink_bytes_per_s', 1 / MB)} MB/s; "
                      f"ratio {spread(runs, 'ratio', 100, '{:.0f}')}%{failed}")
            size = {"1k": "1 KiB", "1m": "1 MiB", "64m": "64 MiB"}.get(r["size"], r["size"])
            rows.append((f"ingest {size} x {r['updates']}, {r['streams']} streams{flags_note(r)}, {n}", figure,
                         ">= 70% of sink" if goal else "(reported)",
                         ("yes" if ratio >= 0.7 and checked else "NO") if goal else ""))
        elif r["bench"] == "dp_quality":
            for x in runs:
                for name, value in x["accuracy"].items():
                    x[f"accuracy_{name}"] = value
            gap = abs(statistics.median(x["accuracy_fedagg"] for x in runs) -
                      statistics.median(x["accuracy_numpy"] for x in runs))
            rows.append((f"DP-FedAvg on digits, {r['clients']} clients ({r['per_round']} a round), {r['rounds']} rounds, "
                         f"z {r['z']:.3g} (epsilon {r['epsilon']:g} at delta {r['delta']:g}), C {r['clip']:g}, "
                         f"{len(runs)} seeds", "test accuracy %: " + "; ".join(
                             f"{name} {spread(runs, f'accuracy_{name}', 100)}" for name in ("fedagg", "numpy", "flower", "none")),
                         "fedagg within 2 points of numpy (medians)", "yes" if gap <= 0.02 else "NO"))
        elif r["bench"] == "privacy":
            ratio = statistics.median(x["ratio"] for x in runs)
            size = {"1m": "1 MiB", "16m": "16 MiB"}.get(r["size"], r["size"])
            rows.append((f"ingest {size} x {r['updates']} federated_mean, {r['streams']} streams, clipped (C=1, z=1) "
                         f"vs not, {n}",
                         f"private {spread(runs, 'private_bytes_per_s', 1 / MB)} MB/s; plain "
                         f"{spread(runs, 'plain_bytes_per_s', 1 / MB)} MB/s; ratio {spread(runs, 'ratio', 100, '{:.0f}')}%"
                         f"{failed}", ">= 90% of plain", "yes" if ratio >= 0.9 and checked else "NO"))
        elif r["bench"] == "rounds":
            goal = r["clients"] == 10
            median = statistics.median(x["median_ms"] for x in runs)
            rows.append((f"round, N = {r['clients']} ({r['rounds']} rounds x {n}, root + 2 intermediates)",
                         f"median {spread(runs, 'median_ms')} ms, p99 {spread(runs, 'p99_ms')} ms{failed}",
                         "median < 10 ms" if goal else "(reported)",
                         ("yes" if median < 10 and checked else "NO") if goal else ""))
        elif r["bench"] == "memory" and r.get("encoding", "plain") != "plain":
            # Issue 46's goal: a node's peak is at most its accumulator (float32, the model's
            # size) and its ingest window of compressed bytes above its idle RSS.
            for x in runs:
                x["peak_over_idle_bytes"] = x["peak_rss_bytes"] - x["idle_rss_bytes"]
            bound = r["model_bytes"] + r["ingest_window_bytes"]
            over = statistics.median(x["peak_over_idle_bytes"] for x in runs)
            rows.append((f"memory, {r['updates']} updates of {r['model_bytes'] / MB:.3g} MB sent {r['encoding']} "
                         f"({r['payload_bytes_per_update'] / MB:.3g} MB each), {r['streams']} stream(s), {n}",
                         f"peak - idle {spread(runs, 'peak_over_idle_bytes', 1 / MIB, '{:.1f}')} MiB; accumulator "
                         f"{r['model_bytes'] / MIB:.1f} + window {r['ingest_window_bytes'] / MIB:.0f} MiB{failed}",
                         "<= accumulator + window", "yes" if over <= bound and checked else "NO"))
        elif r["bench"] == "memory":
            ratio = statistics.median(x["peak_over_idle_in_models"] for x in runs)
            rows.append((f"memory, {r['updates']} updates of {r['model_bytes'] / MB:.3g} MB, {r.get('streams', '?')} stream(s), "
                         f"--batch_max_mib={r.get('batch_max_mib', '?')}{flags_note(r)}, {n}",
                         f"peak RSS {spread(runs, 'peak_rss_bytes', 1 / MIB, '{:.0f}')} MiB, idle "
                         f"{spread(runs, 'idle_rss_bytes', 1 / MIB, '{:.0f}')} MiB: idle + "
                         f"{spread(runs, 'peak_over_idle_in_models')} x model{failed}",
                         "< 3 x model + idle", "yes" if ratio < 3 and checked else "NO"))
        elif r["bench"] == "partial":
            rows.append((f"partial from a child aggregator, {r['model_bytes'] / MB:.3g} MB model "
                         f"({r['updates']} updates at the child), root memory, {n}",
                         f"peak RSS {spread(runs, 'peak_rss_bytes', 1 / MIB, '{:.0f}')} MiB, idle "
                         f"{spread(runs, 'idle_rss_bytes', 1 / MIB, '{:.0f}')} MiB: idle + "
                         f"{spread(runs, 'peak_over_idle_in_models')} x model (its accumulator, the partial "
                         f"decoded, chunks in flight){failed}", "(reported)", ""))
        elif r["bench"] == "scale":
            mids = [max(x["intermediate_peak_rss_bytes"]) for x in runs]
            rows.append((f"scale, {r['clients']} clients through root + 2 intermediates, {n}",
                         f"{spread(runs, 'updates_per_s', fmt='{:.0f}')} upd/s, p99 "
                         f"{spread(runs, 'latency_p99_ms', fmt='{:.0f}')} ms; peak RSS root "
                         f"{spread(runs, 'root_peak_rss_bytes', 1 / MIB, '{:.0f}')} MiB, largest intermediate "
                         f"{statistics.median(mids) / MIB:.0f} MiB{failed}", "(reported)", ""))
        elif r["bench"] == "python":
            ratio = statistics.median(x["ratio"] for x in runs)
            rows.append((f"Python client, {r['updates']} x 16 MiB, {r['threads']} thread(s) on one channel, {n}",
                         f"{spread(runs, 'python_bytes_per_s', 1 / MB, '{:.0f}')} MB/s; fedagg-loadgen "
                         f"{spread(runs, 'loadgen_bytes_per_s', 1 / MB, '{:.0f}')} MB/s; ratio "
                         f"{spread(runs, 'ratio', 100, '{:.0f}')}%{failed}",
                         ">= 80% of fedagg-loadgen", "yes" if ratio >= 0.8 and checked else "NO"))
        elif r["bench"] == "idle":
            rows.append((f"idle server, default flags (backend {r['backend']}), {n}",
                         f"RSS {spread(runs, 'rss_bytes', 1 / MIB)} MiB", "(reported)", ""))
        elif r["bench"] == "peers":
            fedagg = r["contender"].startswith("fedagg")
            rows.append((f"peers: {r['contender']}, {r['clients']} x {r['model_bytes'] / MB:.3g} MB weighted mean",
                         f"{r['median_s']:.3f} s/round [{r['min_s']:.3f}-{r['max_s']:.3f}] over {r['rounds']} rounds, "
                         f"peak {r['peak_over_idle_bytes'] / MB:.0f} MB above idle{failed}",
                         "fedagg ahead on both" if fedagg else "(peer)", ""))
        elif r["bench"] == "table":
            rows.append(table_row(runs, n, failed))
    rows += peer_verdicts(groups)
    return rows


# Goals of the service table on this machine (issue 22), by workload: the cpu backend's rate
# against the bare gRPC sink's; every other backend's against the cpu backend's.
TABLE_SINK_GOALS = {"sparse_sum": 0.80, "dense 16 MiB": 0.80,
                    # issue 46: the model bytes a node takes in, against the sink's bytes of
                    # the same encoded updates (the rows' measure "model")
                    "encoded 16 MiB quantized:8": 3.0, "encoded 16 MiB quantized:4": 5.0}
TABLE_CPU_GOAL = 0.90


def table_row(runs, n, failed):
    """One row of the service table (bench/service_bench.sh table): a backend's rate on one
    workload (the last round of its server), as a ratio to the sink's (the cpu backend) or to
    the cpu backend's of the same run (every other backend); the first round's rates beside."""
    r = runs[0]
    unit, scale = {"updates": ("upd/s", 1.0), "model": ("MB/s of model", 1 / MB)}.get(r["measure"], ("MB/s", 1 / MB))
    title = f"service table: {r['workload']}, {r['backend']} (scale {r['scale']:g}), {n}"
    figure = f"{spread(runs, 'value', scale, '{:,.0f}')} {unit}; sink {spread(runs, 'sink', scale, '{:,.0f}')} {unit}"
    if all(x.get("first_round_value") for x in runs):
        figure += (f" (first round of a fresh server: {spread(runs, 'first_round_value', scale, '{:,.0f}')}; "
                   f"sink {spread(runs, 'first_round_sink', scale, '{:,.0f}')})")
    if r["backend"] == "cpu":
        against, label = "sink", "the sink"
        goal = next((g for prefix, g in TABLE_SINK_GOALS.items() if r["workload"].startswith(prefix)), None)
    else:
        against, label, goal = "cpu", "the cpu backend's", TABLE_CPU_GOAL
    ratios = [{"ratio": x["value"] / x[against]} for x in runs if x.get(against)]
    if not ratios:
        return (title, figure + failed, f"(no {against} figure)", "")
    ratio = statistics.median(x["ratio"] for x in ratios)
    figure += f"; {spread(ratios, 'ratio', 100, '{:.0f}')}% of {label}{failed}"
    if goal is None:
        return (title, figure, "(reported)", "")
    return (title, figure, f">= {100 * goal:.0f}% of {against}", "yes" if ratio >= goal and not failed else "NO")


def peer_verdicts(groups):
    """One row per fedagg contender: is it ahead of every peer on time and on memory, by a
    wide margin (at most half the fastest peer's time and half the leanest peer's memory)?"""
    peers = [runs[0] for runs in groups if runs[0]["bench"] == "peers"]
    others = [p for p in peers if not p["contender"].startswith("fedagg")]
    rows = []
    for mine in (p for p in peers if p["contender"].startswith("fedagg")):
        if not others:
            break
        fastest = min(others, key=lambda p: p["median_s"])
        leanest = min(others, key=lambda p: p["peak_over_idle_bytes"])
        time_ratio = mine["median_s"] / fastest["median_s"]
        memory_ratio = mine["peak_over_idle_bytes"] / max(leanest["peak_over_idle_bytes"], 1)
        rows.append((f"peers verdict: {mine['contender']}",
                     f"time {time_ratio:.2f}x the fastest peer's ({fastest['contender']}), "
                     f"memory {memory_ratio:.2f}x the leanest peer's ({leanest['contender']})",
                     "ahead on both by a wide margin (<= 0.5x)",
                     "yes" if time_ratio <= 0.5 and memory_ratio <= 0.5 else "NO"))
    return rows


def main():
    rows = core_rows(sys.argv[1]) + service_rows(sys.argv[2])
    header = ("benchmark", "figure", "goal", "met")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(4)]
    line = lambda r: "| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |"
    print("\n" + line(header))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print(line(r))


if __name__ == "__main__":
    main()
