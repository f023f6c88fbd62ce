"""What ``benchmarks/serve.py`` prints: its rows, the issue's targets and the most 2 workers can gain here.

Apart from the driving (``serve.py``) so that each file holds one job: the figures are computed from the rows
the client measured, with nothing of the client's.
"""

from __future__ import annotations

import statistics
from typing import Any

P99_TARGET_MS = 20.0
"""The issue's "p99 added <= 20 ms at 200 concurrent conversations"."""
SCALING_TARGET = 1.6
"""The issue's "2 workers >= 1.6x the turns/s of 1"."""
LIMIT_TARGET = 2.0
"""Issue 20: p99 added and server CPU per turn at most 2x the bare app's (the limit), paced, 200 conversations."""


def against_limit(rows: list[dict[str, Any]], limit_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each row of ours beside the bare app's row of the same load and workers: p99 added and server CPU per turn,
    ours, the bare app's, and their ratio."""
    found: list[dict[str, Any]] = []
    for row in rows:
        key = (row["conversations"], row["think_ms"], row["workers"])
        limit = next((r for r in limit_rows if (r["conversations"], r["think_ms"], r["workers"]) == key), None)
        if limit is None:
            continue
        compared: dict[str, Any] = {
            "conversations": key[0],
            "think_ms": key[1],
            "workers": key[2],
            "store": row["store"],
        }
        for figure in ("added_p99_ms", "server_cpu_ms_per_turn"):
            ours, bare = row[figure], limit[figure]
            ratio = round(ours / bare, 2) if ours is not None and bare else None
            compared[figure] = {"ours": ours, "bare": bare, "ratio": ratio}
        found.append(compared)
    return found


def targets(rows: list[dict[str, Any]], limit_rows: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The issues' targets, each with its figure and met or missed.

    The p99 target is judged on each load of 200 conversations separately: closed loop (no think time:
    the server is saturated, so the figure is mostly queueing) and paced (think time between turns).
    The scaling target is judged on the closed-loop rows only: paced rows do not saturate the server.
    The limit targets (issue 20: p99 added and server CPU per turn at most ``LIMIT_TARGET`` x the bare app's)
    are judged on the paced rows of 200 conversations: a saturated server's p99 is its queue.
    """
    found: list[dict[str, Any]] = []
    for compared in against_limit(rows, limit_rows or []):
        if compared["conversations"] != 200 or compared["think_ms"] == 0:
            continue
        where = f"{compared['store']}, {compared['workers']} worker(s), 200 paced conversations"
        for figure, words in (("added_p99_ms", "p99 added"), ("server_cpu_ms_per_turn", "server CPU per turn")):
            ratio = compared[figure]["ratio"]
            found.append(
                {
                    "target": f"{words} <= {LIMIT_TARGET:g}x the bare app's ({where})",
                    "figure": ratio,
                    "met": ratio is not None and ratio <= LIMIT_TARGET,
                }
            )
    for think in sorted({r["think_ms"] for r in rows if r["conversations"] == 200}):
        at_200 = [r for r in rows if r["conversations"] == 200 and r["think_ms"] == think]
        worst = max((r["added_p99_ms"] if r["added_p99_ms"] is not None else float("inf")) for r in at_200)
        load = "closed loop, no think time" if think == 0 else f"think time {think:g} ms"
        found.append(
            {
                "target": f"p99 added <= {P99_TARGET_MS:g} ms at 200 conversations ({load}; worst row)",
                "figure": worst,
                "met": worst <= P99_TARGET_MS,
            }
        )
    bad = sum(
        r["errors"] + r["lost"] + r["duplicated"] + r["mismatched"] + r["unreadable"] + r["landed_after_error"]
        for r in rows
    )
    found.append({"target": "0 errors, 0 lost, 0 duplicated (nor mismatched)", "figure": bad, "met": bad == 0})
    for r1 in rows:
        if r1["workers"] != 1 or r1["think_ms"] != 0:
            continue
        for r2 in rows:
            if (r2["workers"], r2["store"], r2["conversations"], r2["think_ms"]) == (
                2,
                r1["store"],
                r1["conversations"],
                0,
            ):
                ratio = round(r2["turns_per_second"] / r1["turns_per_second"], 2) if r1["turns_per_second"] else None
                found.append(
                    {
                        "target": f"2 workers >= {SCALING_TARGET}x the turns/s of 1 "
                        f"({r1['store']}, {r1['conversations']} conversations)",
                        "figure": ratio,
                        "met": ratio is not None and ratio >= SCALING_TARGET,
                    }
                )
    return found


def scaling_ceiling(rows: list[dict[str, Any]]) -> float | None:
    """What 2 workers can reach over 1 on this machine's 2 cores when the client runs on them too.

    One worker is bound by one core: 1 / server CPU per turn. Two workers share both cores with the
    client: 2 / (server + client CPU per turn). Their ratio, 2s / (s + c), from the closed-loop rows'
    CPU per turn (medians), holds whatever else the machine is running.
    """
    closed = [r for r in rows if r["think_ms"] == 0 and r["server_cpu_ms_per_turn"] and r["client_cpu_ms_per_turn"]]
    if not closed:
        return None
    server: float = statistics.median(r["server_cpu_ms_per_turn"] for r in closed)
    client: float = statistics.median(r["client_cpu_ms_per_turn"] for r in closed)
    return round(min(2.0, 2 * server / (server + client)), 2)


def _print_limit(report: dict[str, Any]) -> None:
    """The bare app's rows, then each of ours against the bare app's of the same load."""
    if not report.get("limit_rows"):
        return
    print("the limit: a bare FastAPI app on the same uvicorn that only awaits the same model (serve_bare.py)")
    print(
        f"{'conv':>5} {'think':>5} {'wk':>2} {'turns/s':>8} {'p50 +ms':>8} {'p99 +ms':>8} {'errors':>6} "
        f"{'sse p50':>8} {'gc >=10ms':>10}"
    )
    for r in report["limit_rows"]:
        print(
            f"{r['conversations']:>5} {r['think_ms']:>5g} {r['workers']:>2} {r['turns_per_second']:>8} "
            f"{r['added_p50_ms']!s:>8} {r['added_p99_ms']!s:>8} {r['errors']:>6} {r['stream_first_char_p50_ms']!s:>8} "
            f"{r.get('gc_pauses')!s:>3} ({r.get('gc_longest_ms')!s:>5})"
        )
    print("ours against the limit (same load, same workers; ratio = ours / bare):")
    print(
        f"{'conv':>5} {'think':>5} {'store':<7} {'wk':>2} {'p99 +ms ours':>12} {'bare':>7} {'ratio':>6} "
        f"{'srv CPU ms/turn ours':>20} {'bare':>6} {'ratio':>6}"
    )
    for c in report["against_limit"]:
        p99, cpu = c["added_p99_ms"], c["server_cpu_ms_per_turn"]
        print(
            f"{c['conversations']:>5} {c['think_ms']:>5g} {c['store']:<7} {c['workers']:>2} {p99['ours']!s:>12} "
            f"{p99['bare']!s:>7} {p99['ratio']!s:>6} {cpu['ours']!s:>20} {cpu['bare']!s:>6} {cpu['ratio']!s:>6}"
        )


def print_report(report: dict[str, Any]) -> None:
    print(
        f"HTTP server under load: {report['turns']} turns per conversation, fake model {report['latency_ms']:g} ms, "
        f"{report['resend']:.0%} of messages re-sent with the same message_id"
    )
    print(f"machine: {report['machine']}; the server workers' collector: {report.get('server_gc', 'default')}")
    header = (
        f"{'conv':>5} {'think':>5} {'store':<7} {'wk':>2} {'turns/s':>8} {'p50 +ms':>8} {'p99 +ms':>8} {'errors':>6} "
        f"{'lost':>5} {'dup':>4} {'mism':>4} {'sse 1st p50':>11} {'p99':>6} {'srv cores':>9} {'client':>6} {'load':>5}"
    )
    print(header)
    for r in report["rows"]:
        print(
            f"{r['conversations']:>5} {r['think_ms']:>5g} {r['store']:<7} {r['workers']:>2} {r['turns_per_second']:>8} "
            f"{r['added_p50_ms']!s:>8} {r['added_p99_ms']!s:>8} {r['errors']:>6} {r['lost']:>5} "
            f"{r['duplicated']:>4} {r['mismatched']:>4} {r['stream_first_char_p50_ms']!s:>11} "
            f"{r['stream_first_char_p99_ms']!s:>6} {r['server_cores']!s:>9} {r['client_cores']!s:>6} "
            f"{r['load_average_1m']:>5}"
        )
        if r["error_kinds"]:
            print(f"      errors: {r['error_kinds']}")
    print(
        "CPU per turn, ms (server / client):",
        ", ".join(f"{r['server_cpu_ms_per_turn']}/{r['client_cpu_ms_per_turn']}" for r in report["rows"]),
    )
    print(
        "server collections of 10 ms or more (count, longest ms):",
        ", ".join(f"{r.get('gc_pauses')} ({r.get('gc_longest_ms')})" for r in report["rows"]),
    )
    _print_limit(report)
    if report.get("scaling_ceiling") is not None:
        print(
            f"2 workers over 1 can reach at most {report['scaling_ceiling']}x here: 2 cores / (server + client CPU "
            "per turn) against 1 core / server CPU per turn, the client being on the same 2 cores"
        )
    print("targets:")
    for t in report["targets"]:
        print(f"  {'met   ' if t['met'] else 'MISSED'} {t['target']}: {t['figure']}")
    for note in report["notes"]:
        print(f"note: {note}")


__all__ = [
    "LIMIT_TARGET",
    "P99_TARGET_MS",
    "SCALING_TARGET",
    "against_limit",
    "print_report",
    "scaling_ceiling",
    "targets",
]
