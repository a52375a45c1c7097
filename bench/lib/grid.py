#!/usr/bin/env python3
"""The bench-grid report: one row per cell (partitions x lock budget), the steady rate of each
client, and the ratios the aims are stated in; a grouped bar chart (SVG, no plotting
dependency). Reads the cells' bench-peers results (results.jsonl in each run directory)."""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import report  # noqa: E402  (summarize, steady_rate)
import section  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NAMES = {
    "ks-explicit": "kafka-share (explicit, 1 consumer)",
    "ks-implicit": "kafka-share (implicit, 1 consumer)",
    "ks-4": "kafka-share (implicit, 4 consumers, 1 process)",
    "ks-4p": "kafka-share (implicit, 4 processes)",
    "franz-explicit": "franz-go (explicit)",
    "franz-implicit": "franz-go (implicit)",
    "java-explicit": "Java KafkaShareConsumer (explicit)",
    "java-implicit": "Java KafkaShareConsumer (implicit)",
    "classic": "classic consumer (ConsumerPerformance): the ceiling",
}
COLOURS = ["#1f77b4", "#aec7e8", "#2ca02c", "#d62728", "#7f7f7f", "#9467bd", "#8c564b", "#e377c2"]


def fmt(x):
    return "–" if x is None else f"{x:,.0f}"


def ratio(a, b):
    return "–" if not a or not b else f"{a / b:.2f}×"


def load(cells_path):
    cells = []
    for line in open(cells_path):
        p, l, run, rc = line.rstrip("\n").split("\t")
        res = os.path.join(run, "results.jsonl")
        rows = [json.loads(x) for x in open(res)] if os.path.exists(res) else []
        cells.append({"p": int(p), "l": int(l), "run": run, "rc": int(rc), "rows": rows})
    return cells


def chart(cells, clients, path):
    w_bar, gap, left, top, height = 9, 14, 70, 30, 260
    groups = len(cells)
    width = groups * (len(clients) * w_bar + gap)
    peak = max([s.get("steady") or 0 for c in cells for s in c["s"].values()] + [1])
    scale = height / peak
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 300}" height="{top + height + 60}" '
           'font-family="sans-serif" font-size="11">',
           f'<text x="{left}" y="16" font-size="13">Steady records/s by cell (partitions, '
           'share.partition.max.record.locks)</text>']
    for i in range(0, 5):
        v = peak * i / 4
        y = top + height - v * scale
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + width}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{v / 1e6:.1f}M</text>')
    for g, c in enumerate(cells):
        x0 = left + g * (len(clients) * w_bar + gap) + gap / 2
        for k, cl in enumerate(clients):
            v = (c["s"].get(cl) or {}).get("steady") or 0
            h = v * scale
            out.append(f'<rect x="{x0 + k * w_bar:.1f}" y="{top + height - h:.1f}" width="{w_bar - 1}" '
                       f'height="{h:.1f}" fill="{COLOURS[k % len(COLOURS)]}"><title>{NAMES.get(cl, cl)}: '
                       f'{v:,.0f}</title></rect>')
        out.append(f'<text x="{x0 + len(clients) * w_bar / 2:.1f}" y="{top + height + 14}" text-anchor="middle">'
                   f'{c["p"]}p</text>')
        out.append(f'<text x="{x0 + len(clients) * w_bar / 2:.1f}" y="{top + height + 27}" text-anchor="middle">'
                   f'{c["l"]}</text>')
    for k, cl in enumerate(clients):
        y = top + 10 + k * 16
        out.append(f'<rect x="{left + width + 12}" y="{y - 9}" width="10" height="10" fill="{COLOURS[k % len(COLOURS)]}"/>')
        out.append(f'<text x="{left + width + 27}" y="{y}">{NAMES.get(cl, cl)}</text>')
    out.append("</svg>")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "w").write("\n".join(out) + "\n")


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--cells", required=True)
    a.add_argument("--out", required=True)
    a.add_argument("--records", type=int, required=True)
    a.add_argument("--rounds", type=int, default=1)
    a.add_argument("--run-id", required=True)
    a.add_argument("--seconds", type=int, default=0)
    a.add_argument("--commit", default=None, help="the commit the run measured (default: HEAD now)")
    args = a.parse_args()
    cells = load(args.cells)
    clients = []
    for c in cells:
        c["s"] = report.summarize(c["rows"], args.records)
        for r in c["rows"]:
            if r["client"] not in clients:
                clients.append(r["client"])
    out_abs = os.path.abspath(args.out)
    if out_abs == os.path.join(REPO, "BENCHMARKS.md"):
        svg = os.path.join(REPO, "benches", "bench-grid.svg")
    else:
        svg = os.path.splitext(out_abs)[0] + "-grid.svg"
    chart(cells, clients, svg)
    commit = args.commit or subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    w = []
    w.append("## The share-fetch ceiling: partitions x lock budget\n")
    w.append(f"Written by `scripts/bench grid` (`--records {args.records} --rounds {args.rounds}`), run "
             f"`{args.run_id}`, commit `{commit}`, {args.seconds} s. Do not edit by hand between the markers: "
             "run the script again.\n")
    w.append("One `scripts/bench peers` run per cell, one broker (Kafka 4.4.0, this 2-core machine), 100-byte "
             "records; every share client's group gets `share.partition.max.record.locks` = the cell's value "
             "(the classic consumer has no such budget). **Steady records/s**: records after the first over "
             "the time after it (the stream, without the join). Medians over the rounds.\n")
    w.append(f"![steady records/s per cell]({os.path.relpath(svg, os.path.dirname(out_abs))})\n")
    head = "| partitions | locks | " + " | ".join(NAMES.get(c, c) for c in clients) + \
           " | ours / classic | ours / franz-go | ours / Java |"
    w.append(head)
    w.append("|" + "--:|" * (2 + len(clients) + 3))
    for c in cells:
        s = c["s"]
        get = lambda k: (s.get(k) or {}).get("steady")  # noqa: E731
        ours = max([v for v in (get("ks-explicit"), get("ks-4"), get("ks-4p"), get("ks-implicit")) if v] or [0]) or None
        peer_f = max([v for v in (get("franz-explicit"), get("franz-implicit")) if v] or [0]) or None
        peer_j = max([v for v in (get("java-explicit"), get("java-implicit")) if v] or [0]) or None
        cols = [fmt(get(k)) for k in clients]
        w.append(f"| {c['p']} | {c['l']} | " + " | ".join(cols) +
                 f" | {ratio(ours, get('classic'))} | {ratio(ours, peer_f)} | {ratio(ours, peer_j)} |")
    w.append("")
    # The evidence of what bounds a cell, from our explicit consumer's own metrics: how big
    # each ShareFetch answer is, and how long its round trip takes (the acknowledgements of
    # the previous answer ride on the request, so this is also the time from an
    # acknowledgement leaving to the next acquisition). Records in flight for the group are at
    # most partitions x locks; one consumer with one fetch per broker in flight holds about
    # one answer's records at a time.
    traced = []
    for c in cells:
        rs = [r for r in c["rows"] if r["client"] == "ks-explicit" and r.get("ok") and r.get("fetches")]
        if rs:
            mid = lambda k: statistics.median(r[k] for r in rs)  # noqa: E731
            traced.append((c, mid("fetches"), mid("records_per_fetch"), mid("fetch_avg_ms"), mid("fetch_max_ms")))
    if traced:
        w.append("Our explicit consumer's fetches in each cell (its own metrics, medians over the rounds): "
                 "**records per fetch** is the mean ShareFetch answer, **round trip** the mean time from "
                 "sending a ShareFetch (carrying the previous answer's acknowledgements) to its answer, the "
                 "broker's wait included; **budget** is partitions x locks, the records the broker lets be "
                 "in flight for the group.\n")
        w.append("| partitions | locks | budget | ShareFetch requests | records per fetch | round trip avg (ms) | "
                 "round trip max (ms) | records per fetch / budget |")
        w.append("|--:|--:|--:|--:|--:|--:|--:|--:|")
        for c, n, per, avg, mx in traced:
            budget = c["p"] * c["l"]
            w.append(f"| {c['p']} | {c['l']} | {budget:,} | {n:,.0f} | {per:,.0f} | {avg:.2f} | {mx:.1f} | "
                     f"{per / budget:.2f} |")
        w.append("")
    w.append("*ours* is our best share column in the cell. Failed runs and raw logs:\n")
    for c in cells:
        bad = [f"{r['client']}: {r.get('error')}" for r in c["rows"] if not r.get("ok")]
        rel = os.path.relpath(c["run"], REPO)
        w.append(f"- {c['p']} partitions, {c['l']} locks: `{rel}`" + (f"; failed: {'; '.join(bad)}" if bad else ""))
    # The findings, written by hand for the run they name, follow in BENCHMARKS.md
    # (bench/findings/grid.md, bench/lib/render.py).
    section.write(args.out, "bench-grid", "\n".join(w))


if __name__ == "__main__":
    main()
