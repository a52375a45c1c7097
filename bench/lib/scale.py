"""The rows and the report of scripts/bench scale.

    scale.py run PART SIDE PARAM ROUND LOG RC LOAD   one JSON row (stdout) for a run
    scale.py fail PART SIDE PARAM ROUND REASON       a row for a run that could not start
    scale.py line < ROW                              the row as one human line
    scale.py report RUN_DIR OUT                      writes the bench-scale section of OUT
    scale.py check RESULTS                           exit 1 if a run failed

PART is drain, idle or produce; PARAM the partitions (drain, produce) or the consumers
(idle). A run's log holds `RESULT {json}` (kafka-share-bench scale, ScaleBench, ProduceBench) or, for
our producer, its line "produced N records ... in S s: R records/s". GNU time wrote
"%e %U %S %M" (wall, user, sys, max RSS KB) into LOG.time. In BENCHMARKS.md the reading,
written by hand (bench/findings/scale.md), follows the report (bench/lib/render.py).
"""
import json
import os
import platform
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import scale_chart  # noqa: E402
import section  # noqa: E402

NAME = "bench-scale"
SIDES = {"ours": "**kafka-share**", "java": "Java KafkaShareConsumer"}
PRODUCERS = {"ours": "**kafka-share** Producer", "java": "Java KafkaProducer"}
# The numbers a RESULT line must hold, per part.
FIELDS = {
    "drain": ("records", "first_s", "drain_s", "cpu_drain_s", "hwm_kb", "idle_s", "idle_cpu_s", "idle_requests"),
    "idle": ("consumers", "join_s", "base_rss_kb", "rss_kb", "base_sockets", "sockets", "idle_s", "idle_cpu_s",
             "idle_requests"),
    "produce": ("records", "seconds", "records_per_sec"),
}


def last_lines(text, n=3):
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", l).strip() for l in text.splitlines()]
    lines = [l for l in lines if l and not l.startswith("RESULT ")]
    errs = [l for l in lines if re.search(r"error|exception|fail|refused|panic|timed out", l, re.I)]
    return " | ".join((errs or lines)[-n:])[:500] or "no output"


def base(part, side, param, rnd):
    return {"part": part, "side": side, "param": int(param), "round": int(rnd)}


def result_of(part, text):
    """The run's figures, or raises ValueError saying why there are none."""
    m = re.findall(r"^RESULT (\{.*\})\s*$", text, re.M)
    if m:
        return json.loads(m[-1])
    p = re.findall(r"produced (\d+) records of \d+ bytes .* in ([0-9.]+) s: ([0-9.]+) records/s", text)
    if part == "produce" and p:
        n, s, rate = p[-1]
        return {"records": int(n), "seconds": float(s), "records_per_sec": float(rate)}
    raise ValueError("no RESULT line in the output: " + last_lines(text))


def run(part, side, param, rnd, log, rc, load):
    text = open(log, errors="replace").read() if os.path.exists(log) else ""
    d = base(part, side, param, rnd)
    d.update(rc=int(rc), load1=float(load))
    try:
        wall, user, sys_, rss = open(log + ".time").read().split()[-4:]
        d.update(wall_s=float(wall), cpu_s=round(float(user) + float(sys_), 3), rss_kb=int(rss))
    except (OSError, ValueError):
        pass
    if int(rc) in (124, 137):
        d["error"] = "killed by the run timeout (exit %s): %s" % (rc, last_lines(text))
    elif int(rc) != 0:
        d["error"] = "exit %s: %s" % (rc, last_lines(text))
    else:
        try:
            res = result_of(part, text)
            missing = [k for k in FIELDS[part] if not isinstance(res.get(k), (int, float))]
            if missing:
                raise ValueError("RESULT lacks %s" % ", ".join(missing))
            d["result"] = res
        except ValueError as e:
            d["error"] = str(e)
    d["status"] = "failed" if "error" in d else "ok"
    return d


def line(d):
    head = "%s %s %s r%s" % (d["part"], d["side"], d["param"], d["round"])
    if d["status"] != "ok":
        return "%s: FAILED: %s" % (head, d.get("error"))
    r = d["result"]
    if d["part"] == "drain":
        return "%s: first record %.2f s, %.0f records/s, CPU %.2f s, peak RSS %.1f MB, idle %.1f requests/s, %.1f ms CPU/s" % (
            head, r["first_s"], r["records"] / r["drain_s"], r["cpu_drain_s"], r["hwm_kb"] / 1024,
            r["idle_requests"] / r["idle_s"], 1000 * r["idle_cpu_s"] / r["idle_s"])
    if d["part"] == "idle":
        return "%s: joined in %.2f s, RSS +%.1f MB, %d sockets, idle %.1f requests/s, %.1f ms CPU/s" % (
            head, r["join_s"], (r["rss_kb"] - r["base_rss_kb"]) / 1024, r["sockets"] - r["base_sockets"],
            r["idle_requests"] / r["idle_s"], 1000 * r["idle_cpu_s"] / r["idle_s"])
    return "%s: %.0f records/s, CPU %.2f s, peak RSS %.1f MB" % (
        head, r["records_per_sec"], d.get("cpu_s", -1), d.get("rss_kb", 0) / 1024)


def med(rows, f):
    vals = [f(d) for d in rows]
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def fmt(v, spec="%.2f"):
    return "–" if v is None else (spec % v)


def by_api(rows):
    """Requests per second by API (medians), e.g. "ShareFetch 2.0, ShareGroupHeartbeat 1.0"."""
    apis = sorted({k for d in rows for k in d["result"].get("idle_by_api", {})})
    parts = []
    for a in apis:
        v = med(rows, lambda d: d["result"].get("idle_by_api", {}).get(a, 0) / d["result"]["idle_s"])
        parts.append("%s %.1f" % (a, v))
    return ", ".join(parts) or "–"


def io_rate(rows):
    """Bytes per second of requests out / responses in over the idle window (ours only)."""
    if not rows or "idle_bytes_out" not in rows[0]["result"]:
        return "–"
    o = med(rows, lambda d: d["result"]["idle_bytes_out"] / d["result"]["idle_s"])
    i = med(rows, lambda d: d["result"]["idle_bytes_in"] / d["result"]["idle_s"])
    return "{:,.0f} / {:,.0f}".format(o, i)


def groups(rows, part, side=None):
    out = {}
    for d in rows:
        if d["part"] == part and (side is None or d["side"] == side):
            out.setdefault((d["side"], d["param"]), []).append(d)
    return out


def drain_table(rows):
    out = ["| client | partitions | first record (s) | records/s | CPU s / M records | peak RSS (MB) | idle requests/s "
           "| idle CPU (ms/s) | idle requests/s by API | idle bytes/s out / in | sockets | runs ok |",
           "|---|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|"]
    g = groups(rows, "drain")
    for side in SIDES:
        for (s, p), all_ in sorted(g.items()):
            if s != side:
                continue
            ok = [d for d in all_ if d["status"] == "ok"]
            r = lambda f: med(ok, lambda d: f(d["result"]))  # noqa: E731
            out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d/%d |" % (
                SIDES[side], "{:,}".format(p), fmt(r(lambda x: x["first_s"])),
                "–" if not ok else "{:,.0f}".format(r(lambda x: x["records"] / x["drain_s"])),
                fmt(r(lambda x: x["cpu_drain_s"] / x["records"] * 1e6)), fmt(r(lambda x: x["hwm_kb"] / 1024), "%.1f"),
                fmt(r(lambda x: x["idle_requests"] / x["idle_s"]), "%.1f"),
                fmt(r(lambda x: 1000 * x["idle_cpu_s"] / x["idle_s"]), "%.1f"),
                by_api(ok) if side == "ours" else "(no per-API count)", io_rate(ok), fmt(r(lambda x: x["sockets"] - x["base_sockets"] if "base_sockets" in x else None), "%.0f"), len(ok), len(all_)))
    return out


def idle_table(rows):
    out = ["| consumers | all joined (s) | RSS above the base (MB) | RSS per consumer (KB) | sockets | per consumer "
           "| idle CPU (ms/s) | per consumer (ms/s) | requests/s | per consumer | requests/s by API | bytes/s out / in "
           "| runs ok |",
           "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|"]
    for (_, n), all_ in sorted(groups(rows, "idle").items()):
        ok = [d for d in all_ if d["status"] == "ok"]
        r = lambda f: med(ok, lambda d: f(d["result"]))  # noqa: E731
        rss = r(lambda x: (x["rss_kb"] - x["base_rss_kb"]) / 1024)
        socks = r(lambda x: x["sockets"] - x["base_sockets"])
        cpu = r(lambda x: 1000 * x["idle_cpu_s"] / x["idle_s"])
        req = r(lambda x: x["idle_requests"] / x["idle_s"])
        per = lambda v, spec="%.2f": fmt(None if v is None else v / n, spec)  # noqa: E731
        out.append("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d/%d |" % (
            n, fmt(r(lambda x: x["join_s"])), fmt(rss, "%.1f"), per(None if rss is None else rss * 1024, "%.0f"),
            fmt(socks, "%.0f"), per(socks, "%.1f"), fmt(cpu, "%.1f"), per(cpu, "%.2f"), fmt(req, "%.1f"),
            per(req, "%.2f"), by_api(ok), io_rate(ok), len(ok), len(all_)))
    return out


def produce_table(rows, meta):
    out = ["| client | records/s | MB/s | vs Java | CPU s (process) | CPU s / M records | peak RSS (MB) | runs ok |",
           "|---|--:|--:|--:|--:|--:|--:|--:|"]
    g = groups(rows, "produce")
    rate = {}
    for (side, _), all_ in g.items():
        rate[side] = med([d for d in all_ if d["status"] == "ok"], lambda d: d["result"]["records_per_sec"])
    for side in PRODUCERS:
        for (s, _), all_ in g.items():
            if s != side:
                continue
            ok = [d for d in all_ if d["status"] == "ok"]
            rps = rate[side]
            vs = "–" if side == "java" or not rps or not rate.get("java") else "%.2f×" % (rps / rate["java"])
            cpu = med(ok, lambda d: d.get("cpu_s"))
            out.append("| %s | %s | %s | %s | %s | %s | %s | %d/%d |" % (
                PRODUCERS[side], "–" if rps is None else "{:,.0f}".format(rps),
                fmt(None if rps is None else rps * meta["size"] / 1e6, "%.1f"), vs, fmt(cpu),
                fmt(None if cpu is None else cpu / meta["produce_records"] * 1e6),
                fmt(med(ok, lambda d: d.get("rss_kb", 0) / 1024), "%.1f"), len(ok), len(all_)))
    return out


def medians(rows, part, side, f):
    """{param: median of f(result)} over the ok runs of part and side."""
    out = {}
    for (s, p), all_ in groups(rows, part, side).items():
        v = med([d for d in all_ if d["status"] == "ok"], lambda d: f(d["result"]) if "result" in d else None)
        if v is not None:
            out[p] = v
    return out


def chart(rows, meta, path):
    """The report's chart at path; False when no run gave figures."""
    panels = []
    ps = sorted({d["param"] for d in rows if d["part"] == "drain"})

    def drain_panel(title, f):
        series = {}
        for side, name in (("ours", "kafka-share"), ("java", "Java")):
            m = medians(rows, "drain", side, f)
            series[name] = [m.get(p) for p in ps]
        panels.append((title + ", by partitions", ["{:,}".format(p) for p in ps], series))

    if ps:
        drain_panel("CPU s per million records", lambda r: r["cpu_drain_s"] / r["records"] * 1e6)
        drain_panel("first record (s)", lambda r: r["first_s"])
        drain_panel("peak RSS (MB)", lambda r: r["hwm_kb"] / 1024)
        drain_panel("idle CPU (ms/s)", lambda r: 1000 * r["idle_cpu_s"] / r["idle_s"])
    ns = sorted({d["param"] for d in rows if d["part"] == "idle"})
    if ns:
        rss = medians(rows, "idle", "ours", lambda r: (r["rss_kb"] - r["base_rss_kb"]) / r["consumers"])
        cpu = medians(rows, "idle", "ours", lambda r: 1000 * r["idle_cpu_s"] / r["idle_s"])
        panels.append(("RSS per consumer (KB), N in one process", ns, {"kafka-share": [rss.get(n) for n in ns]}))
        panels.append(("idle CPU of the process (ms/s), N consumers", ns, {"kafka-share": [cpu.get(n) for n in ns]}))
    prod = {side: medians(rows, "produce", side, lambda r: r["records_per_sec"]) for side in PRODUCERS}
    if any(prod.values()):
        panels.append(("idempotent producer, records/s", ["%d partitions" % meta["produce_partitions"]],
                       {"kafka-share": [next(iter(prod["ours"].values()), None)],
                        "Java": [next(iter(prod["java"].values()), None)]}))
    if not any(v is not None for _, _, series in panels for vs in series.values() for v in vs):
        return False
    scale_chart.write(path, "How cost grows (medians of %d round(s), run %s)" % (meta["rounds"], meta["run"]), panels)
    return True


def version(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "unknown"


def report(run_dir, out):
    meta = json.load(open(os.path.join(run_dir, "meta.json")))
    rows = [json.loads(l) for l in open(os.path.join(run_dir, "results.jsonl")) if l.strip()]
    parts = meta["parts"].split(",")
    smoke = " (smoke run: the figures mean nothing)" if meta["smoke"] else ""
    b = ["## How cost grows%s" % smoke, "",
         "Written by `scripts/bench scale` (`--records %d --partitions %s --consumers %s --idle-s %d --produce-records %d "
         "--rounds %d`), run `%s`, %d s, %s builds of commit %s%s. Do not edit by hand: run the script again (the reading "
         "at the end comes from `bench/findings/scale.md`). Figures are medians over the rounds." % (
             meta["records"], meta["partitions"], meta["consumers"], meta["idle_s"], meta["produce_records"],
             meta["rounds"], meta["run"], meta["duration"], meta["profile"], meta["commit"],
             " with local changes" if meta["dirty"] else ""), ""]
    # The chart beside the report: benches/bench-scale.svg for a full run, as bench-peers'.
    out_dir = os.path.dirname(os.path.abspath(out))
    rel = "smoke.svg" if meta["smoke"] else "benches/bench-scale.svg"
    if chart(rows, meta, os.path.join(out_dir, rel)):
        b += ["![How cost grows](%s)" % rel, ""]
    if "drain" in parts:
        b += ["### One share consumer, 10 to 1,000 partitions", "",
              "One consumer in a fresh share group (implicit acknowledgement) reads a topic of %s records of %d B, "
              "one topic per partition count, then keeps polling (1 s polls) the drained topic for %d s. "
              "**first record**: from `subscribe` to the first record (the join and the first fetch). **records/s**: "
              "all records over the time from `subscribe` to `commit_sync`'s confirmation. **CPU s / M records** and "
              "**peak RSS**: the process's own (/proc/self; the JVM's CPU count), up to the end of the drain, start-up "
              "included. **idle**: over the idle window, requests the client wrote to the broker per second (ours "
              "counted at the wire, by API, with the bytes of requests and responses; Java's from its "
              "`request-total` metrics) and process CPU per second (ours from the threads' schedstat). **sockets**: sockets the process opened and holds at the end (/proc/self/fd, less those it had before the client). Java runs with `-Xmx512m`." % (
                  "{:,}".format(meta["records"]), meta["size"], meta["idle_s"]), ""]
        b += drain_table(rows) + [""]
    if "idle" in parts:
        b += ["### Many consumers in one process", "",
              "N of our consumers in one process, one share group, an empty topic of 4 partitions; each polls "
              "in a task of its own (1 s polls). **all joined**: until the coordinator has answered two heartbeats "
              "of every member. Then 2 s to settle and a %d s idle window: resident set and open sockets "
              "(/proc/self/fd) above the process's own before its first consumer, process CPU and requests per "
              "second. Ours only: Java's would be N clients in one JVM, a test of its own." % meta["idle_s"], ""]
        b += idle_table(rows) + [""]
    if "produce" in parts:
        b += ["### Producer, idempotence on", "",
              "%s records of %d B to a fresh topic of %d partitions per run; both clients with their defaults "
              "(idempotence on, `acks=all`, 5 requests in flight), `batch.size=%d`, `linger.ms=%d`, no compression. "
              "**records/s**: from the first send until every delivery is acknowledged (`flush`). CPU and peak RSS "
              "of the whole process (GNU time; Java `-Xmx512m`, start-up and JIT included). Java: KafkaProducer "
              "(peers/java bench.ProduceBench), kafka-clients %s." % (
                  "{:,}".format(meta["produce_records"]), meta["size"], meta["produce_partitions"],
                  meta["batch_size"], meta["linger_ms"], meta["java_clients"]), ""]
        b += produce_table(rows, meta) + [""]
    failed = [d for d in rows if d["status"] != "ok"]
    if failed:
        b += ["Failed runs:", ""] + ["- %s %s %s round %d: %s" % (
            d["part"], d["side"], d["param"], d["round"], d.get("error")) for d in failed] + [""]
    b += ["Machine: %d CPUs, %s; load %s before, %s after; broker Kafka %s at %s; %s; %s." % (
        meta["nproc"], platform.platform(terse=True), meta["load_before"], meta["load_after"], meta["kafka"],
        meta["bootstrap"] or "scripts/kafka up", version(["rustc", "--version"]), version(["java", "-version"])), ""]
    # The findings (by hand) follow in BENCHMARKS.md: bench/findings/scale.md (bench/lib/render.py).
    section.write(out, NAME, "\n".join(b))


def check(results):
    rows = [json.loads(l) for l in open(results) if l.strip()]
    bad = [d for d in rows if d["status"] != "ok"]
    for d in bad:
        print("bench-scale: failed: " + line(d), file=sys.stderr)
    if not rows:
        print("bench-scale: no runs", file=sys.stderr)
    sys.exit(1 if bad or not rows else 0)


def main(argv):
    cmd = argv[0] if argv else ""
    if cmd == "run" and len(argv) == 8:
        print(json.dumps(run(*argv[1:])))
    elif cmd == "fail" and len(argv) == 6:
        d = base(*argv[1:5])
        d.update(status="failed", error=argv[5])
        print(json.dumps(d))
    elif cmd == "line":
        print(line(json.loads(sys.stdin.read())))
    elif cmd == "report" and len(argv) == 3:
        report(argv[1], argv[2])
    elif cmd == "check" and len(argv) == 2:
        check(argv[1])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
