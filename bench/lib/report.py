"""Writes the report of one scripts/bench peers run: a Markdown file and an SVG chart.

    report.py --run target/bench-peers/run-<id> --out BENCHMARKS.md [--chart FILE]

Reads meta.json, results.jsonl and latency.jsonl of the run. Medians over the rounds, per
client and per figure. The chart (records/s per client) is drawn here as plain SVG: no
plotting dependency. Into BENCHMARKS.md through bench/lib/render.py: the report is the results
of its top part, the findings (written by hand: a run cannot write them) follow from
bench/findings/peers.md.
"""
import argparse
import html
import json
import os
import platform
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import render  # noqa: E402
import section  # noqa: E402
REPO = os.path.dirname(os.path.dirname(HERE))

# id -> (label, mode, family)
CLIENTS = {
    "ks-implicit": ("kafka-share", "implicit", "ours"),
    "ks-explicit": ("kafka-share", "explicit, per-record ACCEPT", "ours"),
    "ks-4": ("kafka-share, 4 consumers in 1 process", "implicit", "ours"),
    "ks-4p": ("kafka-share, 4 processes of 1 consumer", "implicit", "ours"),
    "base-implicit": ("kafka-share at the --baseline revision", "implicit", "ours"),
    "base-explicit": ("kafka-share at the --baseline revision", "explicit, per-record ACCEPT", "ours"),
    "ks-implicit-sasl_ssl": ("kafka-share over SASL_SSL (PLAIN)", "implicit", "ours"),
    "ks-explicit-sasl_ssl": ("kafka-share over SASL_SSL (PLAIN)", "explicit, per-record ACCEPT", "ours"),
    "java-perf": ("Java ShareConsumerPerformance", "implicit", "java"),
    "java-perf-sasl_ssl": ("Java ShareConsumerPerformance over SASL_SSL (PLAIN)", "implicit", "java"),
    "java-implicit": ("Java KafkaShareConsumer (peers/java)", "implicit", "java"),
    "java-explicit": ("Java KafkaShareConsumer (peers/java)", "explicit, per-record ACCEPT", "java"),
    "classic": ("Java ConsumerPerformance, classic group (ceiling)", "offsets, no acks", "classic"),
    "krafka-implicit": ("krafka", "implicit", "other"),
    "krafka-explicit": ("krafka", "explicit, per-record ACCEPT", "other"),
    "krabka-implicit": ("krabka-client-consumer", "implicit", "other"),
    "krabka-explicit": ("krabka-client-consumer", "explicit, per-record ACCEPT", "other"),
    "kafkit-explicit": ("kafkit-client", "explicit, per-record ACCEPT", "other"),
    "crabka-implicit": ("crabka-client-consumer 0.3", "implicit", "other"),
    "crabka-explicit": ("crabka-client-consumer 0.3", "explicit, per-record ACCEPT", "other"),
    "franz-implicit": ("franz-go", "implicit", "other"),
    "franz-explicit": ("franz-go", "explicit, per-record ACCEPT", "other"),
    "python-implicit": ("confluent-kafka-python", "implicit", "other"),
    "python-explicit": ("confluent-kafka-python", "explicit, per-record ACCEPT", "other"),
}
ORDER = list(CLIENTS)
COLORS = {"ours": "#2b6cb0", "java": "#dd6b20", "classic": "#718096", "other": "#38a169"}


def sh(cmd):
    try:
        out = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=30)
        return (out.stdout + out.stderr).strip()
    except Exception as e:  # noqa: BLE001 - any failure is reported as text
        return f"? ({e})"


def read_jsonl(path):
    if not os.path.exists(path):
        return []
    return [json.loads(l) for l in open(path) if l.strip()]


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def machine():
    cpu = "?"
    for l in open("/proc/cpuinfo"):
        if l.startswith("model name"):
            cpu = l.split(":", 1)[1].strip()
            break
    mem = "?"
    for l in open("/proc/meminfo"):
        if l.startswith("MemTotal"):
            mem = f"{int(l.split()[1]) / 1024 / 1024:.1f} GiB"
    return {
        "nproc": sh("nproc"),
        "cpu": cpu,
        "mem": mem,
        "kernel": platform.release(),
    }


def versions(meta):
    v = {"Kafka broker (scripts/kafka, single node, KRaft)": meta.get("kafka", "?")}
    cargo = open(os.path.join(REPO, "Cargo.toml")).read()
    m = re.search(r'^version\s*=\s*"([^"]+)"', cargo, re.M)
    commit = meta.get("commit") or sh("cd " + REPO + " && git rev-parse --short HEAD")
    dirty = meta.get("dirty", bool(sh("cd " + REPO + " && git status --porcelain -- src Cargo.toml")))
    v["kafka-share (this crate)"] = (m.group(1) if m else "?") + (
        f" (built from commit {commit}" + (" plus uncommitted changes in src/" if dirty else "") + ")"
    )
    v["rustc"] = sh("rustc --version")
    v["Java (clients and tools run on)"] = sh("java -version 2>&1 | head -n 1")
    v["Java kafka-clients / tools"] = meta.get("kafka", "?") + " (same as the broker)"
    for crate, folder in (("krafka", "rust-krafka"), ("krabka-client-consumer", "rust-krabka"),
                          ("kafkit-client", "rust-kafkit")):
        lock = os.path.join(REPO, "peers", folder, "Cargo.lock")
        kv = "?"
        if os.path.exists(lock):
            m = re.search(r'name = "' + re.escape(crate) + r'"\nversion = "([^"]+)"', open(lock).read())
            kv = m.group(1) if m else "?"
        v[f"{crate} (crates.io)"] = kv
    gomod = os.path.join(REPO, "peers/go/go.mod")
    m = re.search(r"github.com/twmb/franz-go v(\S+)", open(gomod).read()) if os.path.exists(gomod) else None
    v["franz-go (Go module proxy)"] = (m.group(1) if m else "?") + f", {sh('go version')}"
    py = os.path.join(REPO, "target/bench-peers/venv/bin/python")
    if os.path.exists(py):
        v["confluent-kafka-python (PyPI)"] = sh(
            py + " -c 'import confluent_kafka as c; print(c.version()[0] if isinstance(c.version(), tuple) else c.version(), "
            "\"(librdkafka\", c.libversion()[0] + \")\")'"
        )
    return v


def steady_rate(r, records):
    """Records after the first over the time after the first: the stream without the join."""
    e, f = r.get("elapsed_s"), r.get("first_s")
    if e is None or f is None or e <= f or not records:
        return None
    return (records - 1) / (e - f)


def summarize(rows, records=None):
    by = {}
    for r in rows:
        by.setdefault(r["client"], []).append(r)
    out = {}
    for c, rs in by.items():
        ok = [r for r in rs if r.get("ok")]
        s = {"runs": len(rs), "ok": len(ok), "errors": [r.get("error") for r in rs if not r.get("ok")]}
        for k in ("rate", "mb_s", "elapsed_s", "first_s", "cpu_per_m", "rss_kb", "cpu_s",
                  "broker_cpu_per_m", "cpu_bound", "machine_busy"):
            s[k] = median([r.get(k) for r in ok])
        s["steady"] = median([steady_rate(r, records) for r in ok])
        s["rates"] = [r.get("rate") for r in ok]
        out[c] = s
    return out


def row_name(c):
    """A client's name in a table row (ours in bold), its mode and its family."""
    label, mode, fam = CLIENTS[c]
    return (f"**{label}**" if fam == "ours" else label), mode, fam


def fmt(x, spec="{:,.0f}", none="–"):
    return none if x is None else spec.format(x)


def ratio(a, b):
    if a is None or b is None or b == 0:
        return "–"
    return f"{a / b:.2f}×"


def java_ref(c):
    if c.endswith("-sasl_ssl"):
        return "java-perf-sasl_ssl"
    return "java-explicit" if c.endswith("explicit") else "java-perf"


def chart(summary, path, meta):
    rows = [(c, summary[c]["rate"]) for c in ORDER if c in summary and summary[c]["rate"]]
    failed = [c for c in ORDER if c in summary and not summary[c]["rate"]]
    if not rows:
        return False
    top = max(r for _, r in rows)

    def name_of(c):
        label, mode, fam = CLIENTS[c]
        return label if fam == "classic" else f"{label} ({mode})"

    # ~7 px per character at 13 px sans-serif.
    left = 20 + 7 * max(len(name_of(c)) for c in ORDER if c in summary)
    width, bar, gap = 420, 22, 8
    height = 60 + (len(rows) + len(failed)) * (bar + gap) + 30
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 140}" height="{height}" '
        f'font-family="sans-serif" font-size="13">',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="10" y="22" font-size="15" font-weight="bold">Records/s until the last record is '
        f'acknowledged (median of {meta["rounds"]} round(s), {meta["records"]:,} records of {meta["size"]} B)</text>',
    ]
    y = 45
    for c, r in rows:
        label, mode, fam = CLIENTS[c]
        w = max(1, r / top * width)
        name = html.escape(name_of(c))
        out.append(f'<text x="{left - 8}" y="{y + bar - 7}" text-anchor="end">{name}</text>')
        out.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar}" fill="{COLORS[fam]}"/>')
        out.append(f'<text x="{left + w + 6:.1f}" y="{y + bar - 7}">{r:,.0f}</text>')
        y += bar + gap
    for c in failed:
        out.append(f'<text x="{left - 8}" y="{y + bar - 7}" text-anchor="end">{html.escape(name_of(c))}</text>')
        out.append(f'<text x="{left + 6}" y="{y + bar - 7}" fill="#c53030">did not run (see the table)</text>')
        y += bar + gap
    out.append(
        f'<text x="10" y="{y + 18}" fill="#555">blue: kafka-share; orange: Java; green: other share-group '
        f"clients; grey: classic consumer group (ceiling)</text>"
    )
    out.append("</svg>")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    open(path, "w").write("\n".join(out) + "\n")
    return True


def targets(s, lat):
    lines = []

    def rate(c):
        return s.get(c, {}).get("rate")

    def check(ok, text):
        mark = "n/a" if ok is None else ("**met**" if ok else "**not met**")
        lines.append(f"| {text} | {mark} |")

    ours_i, ours_e = rate("ks-implicit"), rate("ks-explicit")
    ji, je, cl = rate("java-perf"), rate("java-explicit"), rate("classic")

    def ge(a, b, k=1.0):
        return None if a is None or b is None else a >= k * b

    check(ge(ours_i, ji, 1.5), f"implicit ≥ 1.5× Java ShareConsumerPerformance ({ratio(ours_i, ji)})")
    check(ge(ours_e, je, 1.5), f"explicit ≥ 1.5× Java KafkaShareConsumer explicit ({ratio(ours_e, je)})")
    others_i = [rate(c) for c in ("krafka-implicit", "krabka-implicit", "franz-implicit", "python-implicit") if rate(c)]
    others_e = [rate(c) for c in ("krafka-explicit", "krabka-explicit", "kafkit-explicit", "franz-explicit",
                                  "python-explicit") if rate(c)]
    check(ge(ours_i, max(others_i)) if others_i else None,
          f"implicit ≥ best other client ({fmt(ours_i)} vs {fmt(max(others_i) if others_i else None)} records/s)")
    check(ge(ours_e, max(others_e)) if others_e else None,
          f"explicit ≥ best other client ({fmt(ours_e)} vs {fmt(max(others_e) if others_e else None)} records/s)")
    best_ours = max([x for x in (ours_i, rate("ks-4"), rate("ks-4p")) if x] or [0]) or None
    check(ge(best_ours, cl, 0.9), f"within 10% of the classic ceiling (best of ours: {ratio(best_ours, cl)} of it)")
    ri, rj = s.get("ks-implicit", {}).get("rss_kb"), s.get("java-perf", {}).get("rss_kb")
    check(None if ri is None or rj is None else ri < rj / 10,
          f"peak RSS < 1/10 of Java's ({fmt(ri and ri / 1024, '{:.1f}')} MB vs {fmt(rj and rj / 1024, '{:.0f}')} MB)")
    ti, te, tj = rate("ks-implicit-sasl_ssl"), rate("ks-explicit-sasl_ssl"), rate("java-perf-sasl_ssl")
    if ti or te or tj:
        check(ge(ti, ours_i, 0.85), f"SASL_SSL costs < 15% of plaintext, implicit ({ratio(ti, ours_i)} of plaintext)")
        check(ge(te, ours_e, 0.85), f"SASL_SSL costs < 15% of plaintext, explicit ({ratio(te, ours_e)} of plaintext)")
        check(ge(ti, tj, 1.5), f"over SASL_SSL, implicit ≥ 1.5× Java ShareConsumerPerformance ({ratio(ti, tj)})")
    # One check per rate (rows of older runs carry no rate: one rate then).
    rates = sorted({l.get("rate") for l in lat if l.get("ok")}, key=lambda r: r or 0)
    for r in rates or [None]:
        lo = {l["client"]: l for l in lat if l.get("ok") and l.get("rate") == r}
        at = f" at {r:,} records/s" if r else ""
        if "kafka-share" in lo and "java" in lo:
            check(lo["kafka-share"]["p99_ms"] <= lo["java"]["p99_ms"],
                  f"p99 latency ≤ Java's{at} ({lo['kafka-share']['p99_ms']} ms vs {lo['java']['p99_ms']} ms)")
        else:
            check(None, f"p99 latency ≤ Java's{at} (latency test not run)")
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--chart")
    # A run of a few clients kept beside the main table (e.g. the Rust peers' short run): its
    # report becomes section NAME of --out (section.py), the rest of the file untouched; in
    # BENCHMARKS.md its hand-written findings (bench/findings) follow it.
    ap.add_argument("--section")
    a = ap.parse_args()
    meta = json.load(open(os.path.join(a.run, "meta.json")))
    rows = read_jsonl(os.path.join(a.run, "results.jsonl"))
    lat = read_jsonl(os.path.join(a.run, "latency.jsonl"))
    s = summarize(rows, meta.get("records"))
    out_abs = os.path.abspath(a.out)
    if a.chart:
        chart_path = a.chart
    elif a.section:
        chart_path = os.path.join(REPO, "benches", f"bench-peers-{a.section}.svg")
    elif out_abs == os.path.join(REPO, "BENCHMARKS.md"):
        chart_path = os.path.join(REPO, "benches", "bench-peers.svg")
    else:
        chart_path = os.path.splitext(out_abs)[0] + ".svg"
    have_chart = chart(s, chart_path, meta)
    mach = machine()
    md = []
    w = md.append
    smoke = " (smoke run)" if meta.get("smoke") else ""
    w(f"# Benchmarks: kafka-share against the other share-group clients{smoke}\n")
    w(
        "Written by `scripts/bench peers` "
        f"(`--records {meta['records']} --size {meta['size']} --partitions {meta['partitions']} --rounds {meta['rounds']}`), "
        f"run `{meta['run_id']}`, {meta['duration_s']} s. Do not edit by hand: run the script again "
        "(the findings at the end come from `bench/findings/peers.md`).\n"
    )
    w("Three more scripts own sections at the end of this file, each rewritten only by its own run "
      "(bench-peers keeps them): `scripts/bench sink` (*Sink runtime vs Kafka Connect*: the sink runtime "
      "against Kafka Connect standalone, a plain and a head-of-line case), `scripts/bench process` "
      "(*Processing with concurrent handlers*: the processor engine against a batch-barrier loop on "
      "`ShareConsumer` and Java's `KafkaShareConsumer` with a 64-thread pool, the same simulated work on "
      "every side: 1 ms per record, 500 ms for one in 1000) and `scripts/bench scale` (*How cost grows*: "
      "one consumer on 10 to 1,000 partitions, ours and Java's, join, CPU, memory and idle requests; "
      "1 to 100 consumers in one process; the idempotent producer against Java's).\n")
    w("One broker, one topic, every client in its own fresh share group "
      "(`share.auto.offset.reset=earliest`), one client at a time, interleaved over the rounds "
      "(each round rotates the order). Figures are medians over the rounds.\n")
    w("- **records/s, MB/s**: records (values of "
      f"{meta['size']} B) divided by the time from just before `subscribe` (the client is already "
      "created and connected) until the acknowledgement of the last record is confirmed by the broker "
      "(`commit_sync` / `commitSync` / `FlushAcks` / `commit`). Includes joining the group (see *first record*).\n"
      "  Exceptions, as Kafka's own tools measure: ShareConsumerPerformance stops its clock at the poll that "
      "returns the last record (its final commitSync is not timed); ConsumerPerformance (classic group) times "
      "from before subscribe to the last record, commits not included.\n"
      "- **first record**: seconds from that start to the first record (mostly the group join; "
      "for the classic consumer its rebalance time).\n"
      "- **steady records/s**: the stream without the join: records after the first over the time from the "
      "first record to the end (as above). **steady vs classic** compares that with the classic consumer's.\n"
      "- **CPU s / M records**: user+sys CPU of the whole process (GNU time), start-up and JIT included, "
      "per million records.\n"
      "- **peak RSS**: maximum resident set of the process (GNU time). Java runs with `-Xmx512m`.\n"
      "- **vs Java**: implicit rows against ShareConsumerPerformance, explicit rows against the Java "
      "KafkaShareConsumer with per-record ACCEPT (peers/java). **vs classic**: against the classic "
      "consumer group's ConsumerPerformance on the same topic.\n")
    w(f"Topic: {meta['records']:,} records, {meta['partitions']} partitions, written by our producer "
      f"(`batch.size=262144`, `linger.ms=10`, no compression): {meta.get('produce', '')}."
      + (f" The brokers' warm-up before the first client (not measured): {meta['warm']}." if meta.get("warm") else "")
      + "\n")
    w("## Throughput\n")
    if have_chart:
        rel = os.path.relpath(chart_path, os.path.dirname(out_abs))
        w(f"![records/s per client]({rel})\n")
    w("| client | mode | records/s | steady records/s | MB/s | vs Java | vs classic | steady vs classic | first record (s) | CPU s / M records | peak RSS (MB) | runs ok |")
    w("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    cl = s.get("classic", {}).get("rate")
    cls = s.get("classic", {}).get("steady")
    for c in ORDER:
        if c not in s:
            continue
        x = s[c]
        name, mode, fam = row_name(c)
        if x["rate"] is None:
            err = (x["errors"] or ["?"])[0]
            w(f"| {name} | {mode} | did not run: {md_escape(err)} | | | | | | | | | 0/{x['runs']} |")
            continue
        jr = s.get(java_ref(c), {}).get("rate") if fam != "java" and c != "classic" else None
        w(
            f"| {name} | {mode} | {fmt(x['rate'])} | {fmt(x.get('steady'))} | {fmt(x['mb_s'], '{:.1f}')} | "
            f"{ratio(x['rate'], jr) if jr else '–'} | {ratio(x['rate'], cl) if c != 'classic' else '1.00×'} | "
            f"{(ratio(x.get('steady'), cls) if x.get('steady') and cls else '–') if c != 'classic' else '1.00×'} | "
            f"{fmt(x['first_s'], '{:.2f}')} | {fmt(x['cpu_per_m'], '{:.2f}')} | "
            f"{fmt(x['rss_kb'] and x['rss_kb'] / 1024, '{:.1f}')} | {x['ok']}/{x['runs']} |"
        )
    w("")
    if any(s[c].get("broker_cpu_per_m") is not None for c in s):
        w("### Where the CPU goes\n")
        w("The brokers' CPU (user+sys of their JVMs, from /proc) over each client's run, beside the "
          "client's own, per million records; **busy**: the share of the machine's cores busy meanwhile "
          "(anything else running included); **CPU bound**: the rate if the "
          f"{os.cpu_count()} cores did nothing but this client and its brokers at that CPU per record, "
          "nproc x records / (client + broker CPU). Where **busy** is near 100%, the cores are the bound "
          "and **of bound** says how near the client comes to it; a client that costs the brokers "
          "less per record has a higher bound.\n")
        w("| client | mode | records/s | client CPU s / M | broker CPU s / M | busy | CPU bound records/s | of bound |")
        w("|---|---|--:|--:|--:|--:|--:|--:|")
        for c in ORDER:
            x = s.get(c)
            if not x or x.get("broker_cpu_per_m") is None:
                continue
            name, mode, _ = row_name(c)
            w(f"| {name} | {mode} | {fmt(x['rate'])} | {fmt(x['cpu_per_m'], '{:.2f}')} | "
              f"{fmt(x['broker_cpu_per_m'], '{:.2f}')} | {fmt(x.get('machine_busy') and 100 * x['machine_busy'], '{:.0f}%')} | "
              f"{fmt(x.get('cpu_bound'))} | {ratio(x['rate'], x.get('cpu_bound'))} |")
        w("")
    errs = [(c, e) for c in ORDER if c in s for e in s[c]["errors"] if s[c]["rate"] is not None and e]
    if errs:
        w("Failed runs of clients that did run otherwise:\n")
        for c, e in errs:
            w(f"- {c}: {md_escape(e)}")
        w("")
    w("## Targets\n")
    w("| target | result |")
    w("|---|---|")
    md.extend(targets(s, lat))
    w("")
    if lat:
        w("## Latency\n")
        rates = meta.get("latency_rates") or [meta.get("latency_rate", 5000)]
        w(f"A producer (ours, `linger.ms=0`) writes {' and then '.join(f'{r:,}' for r in rates)} records/s for "
          f"{meta.get('latency_seconds', 30)} s to a fresh {meta['partitions']}-partition topic while one "
          "consumer polls it in its own share group, acknowledging every record with ACCEPT (explicit "
          "mode). Latency: the wall clock when `poll` returns minus the record's timestamp (set by the "
          "producer at `send`; same machine, so same clock), over the records produced after the first 5 s "
          "(join and JIT warm-up). One consumer at a time, each on its own fresh topic and stream.\n")
        if meta.get("latency_run"):
            w(f"Measured by `scripts/bench peers --latency-only`, run `{meta['latency_run']}`, right after "
              "the throughput rounds (its latency.jsonl copied into this run's results).\n")
        names = {"kafka-share": "**kafka-share**", "java": "Java KafkaShareConsumer", "franz-go": "franz-go"}
        w("| records/s | consumer | records | measured | p50 (ms) | p99 (ms) | max (ms) | load |")
        w("|--:|---|--:|--:|--:|--:|--:|--:|")
        for l in lat:
            name = names.get(l["client"], l["client"])
            r = fmt(l.get("rate") or (None if l.get("skipped") else meta.get("latency_rate")))
            if l.get("ok"):
                w(f"| {r} | {name} | {l['records']:,} | {l['measured']:,} | {l['p50_ms']} | {l['p99_ms']} | {l['max_ms']} | {fmt(l.get('load1'), '{:.1f}')} |")
            else:
                w(f"| {r} | {name} | did not run: {md_escape(l.get('error', '?'))} | | | | | |")
        w("")
    w("## Machine and versions\n")
    w(f"- {mach['nproc']} CPUs: {mach['cpu']}; {mach['mem']} memory; Linux {mach['kernel']}. "
      "Shared with other engineers' builds and tests: load average "
      f"{meta.get('load_before', '?')} before the run, {meta.get('load_after', '?')} after "
      "(the per-run 1-minute load is in the raw results). Expect noise of ±20%.")
    if meta.get("nodes", 1) > 1:
        w(f"- Brokers: the {meta['nodes']}-node cluster of `scripts/kafka up --nodes {meta['nodes']}` at "
          f"{meta['bootstrap']} (combined broker+controller nodes, topics replicated 3 ways).")
    else:
        w(f"- Broker: `scripts/kafka up` at {meta['bootstrap']} (JVM heap 256-768 MB, G1).")
    for k, v in versions(meta).items():
        w(f"- {k}: {v}")
    w("")
    w("<details><summary>Every run</summary>\n")
    w("| client | round | records/s | elapsed (s) | first (s) | CPU (s) | broker CPU (s) | RSS (MB) | load | result |")
    w("|---|--:|--:|--:|--:|--:|--:|--:|--:|---|")
    for r in sorted(rows, key=lambda r: (ORDER.index(r["client"]), r.get("round", 0))):
        w(
            f"| {r['client']} | {r.get('round', '')} | {fmt(r.get('rate'))} | {fmt(r.get('elapsed_s'), '{:.2f}')} | "
            f"{fmt(r.get('first_s'), '{:.2f}')} | {fmt(r.get('cpu_s'), '{:.2f}')} | {fmt(r.get('broker_cpu_s'), '{:.2f}')} | "
            f"{fmt(r.get('rss_kb') and r['rss_kb'] / 1024, '{:.1f}')} | {fmt(r.get('load1'), '{:.1f}')} | "
            f"{'ok' if r.get('ok') else md_escape(r.get('error', ''))} |"
        )
    w("\n</details>\n")
    if a.section:
        write_section(a.section, md, out_abs, meta)
        return 0
    # BENCHMARKS.md is rendered whole from its parts (bench/lib/render.py): this run's report
    # is the results of its top part; the findings (bench/findings/peers.md) and the other
    # sections follow.
    if out_abs == render.TARGET:
        render.store(None, "\n".join(md))
        return 0
    # Another file: the other sections it holds between their markers are kept.
    if os.path.exists(out_abs):
        old = open(out_abs).read()
        for name in render.MARKERS:
            kept = section.extract(old, name)
            if kept:
                w("")
                w(kept)
    os.makedirs(os.path.dirname(out_abs), exist_ok=True)
    open(out_abs, "w").write("\n".join(md).rstrip() + "\n")


def write_section(name, md, out_abs, meta):
    """The report as section NAME of out_abs: headings one level down, without the paragraph
    about the other scripts' sections (the hand-written findings follow in BENCHMARKS.md:
    bench/findings/NAME.md)."""
    body = []
    for line in md:
        if line.startswith("Three more scripts own sections"):
            continue
        if line.startswith("#"):
            line = "#" + line
        body.append(line.replace("`bench/findings/peers.md`", f"`bench/findings/{name}.md`"))
    body[0] = "## Share clients, a run of `--clients` %s (run `%s`)%s\n" % (
        ",".join(meta.get("clients", [])) or "?", meta["run_id"],
        " (smoke run)" if meta.get("smoke") else "")
    section.write(out_abs, name, "\n".join(body))


def md_escape(s):
    return (s or "").replace("|", "\\|").replace("\n", " ")


if __name__ == "__main__":
    sys.exit(main())
