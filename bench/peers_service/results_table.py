"""The table of bench/peers_service_bench.sh: per update size and client count, one row per
contender with the median [min-max] of its runs' round seconds and server peak MiB above
idle, the ratio of its medians to the best peer's (the lowest median among NVIDIA FLARE
and Flower, time and memory separately), and for fedagg's rows the verdict on issue 24's
goals: round <= 0.33x the best peer's, memory <= 0.5x. A contender that was not run, or
whose check failed, shows why instead of figures."""
import statistics

ROUND_GOAL, MEMORY_GOAL = 0.33, 0.5


def spread(values, digits):
    return f"{statistics.median(values):.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"


def format_table(rows):
    """rows: dicts with contender, peer (bool), clients, update_mb, and either runs (list of
    {"round_s", "peak_mib"}) or not_run (the reason)."""
    header = ("| contender | N | update | round s, median [min-max] | server peak MiB above idle | "
              "round / best peer | memory / best peer | goals (round <= 0.33x, memory <= 0.5x) |")
    lines = [header, "|" + "---|" * 8]
    for key in sorted({(r["update_mb"], r["clients"]) for r in rows}, key=lambda k: (-k[0], k[1])):
        group = [r for r in rows if (r["update_mb"], r["clients"]) == key]
        measured = [r for r in group if r.get("runs")]
        peers = [r for r in measured if r["peer"]]
        best_round = min((statistics.median(x["round_s"] for x in r["runs"]) for r in peers), default=None)
        best_memory = min((statistics.median(x["peak_mib"] for x in r["runs"]) for r in peers), default=None)
        for r in group:
            lead = f"| {r['contender']} | {r['clients']:,} | {r['update_mb']:g} MB |"
            if not r.get("runs"):
                lines.append(f"{lead} not run: {r['not_run']} | | | | |")
                continue
            rounds = [x["round_s"] for x in r["runs"]]
            memory = [x["peak_mib"] for x in r["runs"]]
            round_ratio = statistics.median(rounds) / best_round if best_round else None
            memory_ratio = statistics.median(memory) / best_memory if best_memory else None
            verdict = ""
            if not r["peer"]:
                if round_ratio is None:
                    verdict = "no peer measured"
                else:
                    verdict = (f"round {'met' if round_ratio <= ROUND_GOAL else 'missed'}, "
                               f"memory {'met' if memory_ratio <= MEMORY_GOAL else 'missed'}")
            ratio = lambda x: "" if x is None else f"{x:.2f}x"
            lines.append(f"{lead} {spread(rounds, 2)} | {spread(memory, 0)} | {ratio(round_ratio)} | "
                         f"{ratio(memory_ratio)} | {verdict} |")
    return "\n".join(lines)
