#!/usr/bin/env python3
"""Prints scripts/bench.sh's one summary table: the core reduction against the memory
bandwidth baseline (Google Benchmark's JSON output), then the service benchmarks' BENCH
lines (bench/service_bench.sh), each figure beside its goal and whether it was met.
Usage: summary.py CORE_JSON SERVICE_LOG"""
import json
import sys

MB = 1e6
MIB = 1 << 20


def core_rows(path):
    try:
        runs = json.load(open(path))["benchmarks"]
    except (OSError, ValueError, KeyError):
        return [("core reduction", "not run", "", "")]
    median = {b["run_name"]: b["bytes_per_second"] for b in runs
              if b.get("aggregate_name") == "median" and "bytes_per_second" in b}
    base = next((v for k, v in median.items() if k.startswith("BM_BandwidthBaseline")), None)
    rows = []
    for name, rate in median.items():
        if base is None or name.startswith("BM_BandwidthBaseline"):
            continue
        short = name.replace("BM_", "").replace("/real_time", "")
        dense_sum = short.startswith("DenseSum/")
        rows.append((f"core {short}", f"{rate / 1e9:.2f} GB/s = {100 * rate / base:.0f}% of bandwidth baseline",
                     ">= 80% of baseline" if dense_sum else "(reported)",
                     ("yes" if rate >= 0.8 * base else "NO") if dense_sum else ""))
    return rows


def service_rows(path):
    rows = []
    for line in open(path):
        if not line.startswith("BENCH "):
            continue
        r = json.loads(line[len("BENCH "):])
        checked = "" if r.get("checked") else " (RESULT CHECK FAILED)"
        if r["bench"] == "ingest":
            goal = r["size"] != "1k"
            figure = (f"fedagg {r['fedagg_bytes_per_s'] / MB:.1f} MB/s, {r['fedagg_updates_per_s']:.0f} upd/s; "
                      f"sink {r['sink_bytes_per_s'] / MB:.1f} MB/s, {r['sink_updates_per_s']:.0f} upd/s; "
                      f"ratio {100 * r['ratio']:.0f}%{checked}")
            size = {"1k": "1 KiB", "1m": "1 MiB", "64m": "64 MiB"}.get(r["size"], r["size"])
            rows.append((f"ingest {size} x {r['updates']}, {r['streams']} streams", figure,
                         ">= 70% of sink" if goal else "(reported)",
                         ("yes" if r["ratio"] >= 0.7 and r["checked"] else "NO") if goal else ""))
        elif r["bench"] == "rounds":
            goal = r["clients"] == 10
            rows.append((f"round, N = {r['clients']} ({r['rounds']} round(s), root + 2 intermediates)",
                         f"median {r['median_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms{checked}",
                         "median < 10 ms" if goal else "(reported)",
                         ("yes" if r["median_ms"] < 10 and r["checked"] else "NO") if goal else ""))
        elif r["bench"] == "memory":
            ratio = r["peak_over_idle_in_models"]
            rows.append((f"memory, {r['updates']} updates of {r['model_bytes'] / MB:.3g} MB, {r['streams']} stream(s), "
                         f"--batch_max_mib={r['batch_max_mib']}",
                         f"peak RSS {r['peak_rss_bytes'] / MIB:.0f} MiB, idle {r['idle_rss_bytes'] / MIB:.0f} MiB: "
                         f"idle + {ratio:.1f} x model{checked}",
                         "< 3 x model + idle", "yes" if ratio < 3 and r["checked"] else "NO"))
        elif r["bench"] == "scale":
            mids = ", ".join(f"{b / MIB:.0f}" for b in r["intermediate_peak_rss_bytes"])
            rows.append((f"scale, {r['clients']} clients through root + 2 intermediates",
                         f"{r['updates_per_s']:.0f} upd/s, p99 {r['latency_p99_ms']:.0f} ms; peak RSS root "
                         f"{r['root_peak_rss_bytes'] / MIB:.0f} MiB, intermediates {mids} MiB{checked}",
                         "(reported)", ""))
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
