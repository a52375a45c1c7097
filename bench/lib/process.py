"""The rows and the report of scripts/bench process.

    process.py run SIDE ROUND WANT LOG TIMEFILE RC LOAD   one JSON row (stdout) for a run
    process.py skip SIDE ROUND WANT REASON               a row for a side that was skipped
    process.py fail SIDE ROUND WANT REASON               a row for a side that could not run
    process.py line < ROW                                the row as one human line
    process.py report RUN_DIR OUT                        writes the bench-process section of OUT
    process.py check RESULTS                             exit 1 if a side that ran failed
    process.py half-rate RESULTS                         half the ceiling's median records/s (0: none)

A run's log holds the program's line `RESULT {json}`; these fields are required (FIELDS):
records, seconds, records_per_sec, first_record_s, p50_ms, p99_ms; others (max_ms, polls,
max_batch, redelivered, slow_records...) are kept in the raw results. GNU time wrote
"%e %U %S %M" (wall, user, sys, max RSS KB) into TIMEFILE.
"""
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import section  # noqa: E402

FIELDS = ("records", "seconds", "records_per_sec", "first_record_s", "p50_ms", "p99_ms")
SIDES = ("ceiling", "ours", "barrier", "java")
# The fixed-rate runs at half the ceiling's rate (scripts/bench process --half-load-seconds).
HALF_SIDES = ("ceiling-half", "ours-half")


def last_lines(text, n=4):
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", l).strip() for l in text.splitlines()]
    lines = [l for l in lines if l and not l.startswith("RESULT ")]
    errs = [l for l in lines if re.search(r"error|exception|fail|refused|panic|timed out", l, re.I)]
    return " | ".join((errs or lines)[-n:])[:600] or "no output"


def row(side, rnd, want, **kw):
    d = {"side": side, "round": int(rnd), "want": int(want)}
    d.update(kw)
    return d


def run(side, rnd, want, log, timefile, rc, load):
    text = open(log, errors="replace").read() if os.path.exists(log) else ""
    d = row(side, rnd, want, rc=int(rc), load1=float(load))
    try:
        t = [l for l in open(timefile).read().splitlines() if re.match(r"^[0-9.]+ [0-9.]+ [0-9.]+ [0-9]+$", l)]
        wall, user, sys_, rss = t[-1].split()
        d.update(wall_s=float(wall), cpu_s=round(float(user) + float(sys_), 3), rss_kb=int(rss))
    except (OSError, IndexError, ValueError):
        pass
    m = re.findall(r"^RESULT (\{.*\})\s*$", text, re.M)
    res = None
    if m:
        try:
            res = json.loads(m[-1])
        except ValueError as e:
            d["error"] = "RESULT line is no JSON (%s): %s" % (e, m[-1][:200])
    if res is not None:
        d["result"] = res
    rc = int(rc)
    if "error" in d:
        pass
    elif rc in (124, 137):
        d["error"] = "killed by the run timeout (exit %d); last output: %s" % (rc, last_lines(text))
    elif rc != 0:
        d["error"] = "exit %d: %s" % (rc, last_lines(text))
    elif res is None:
        d["error"] = "no RESULT line in the output: " + last_lines(text)
    else:
        missing = [k for k in FIELDS if not isinstance(res.get(k), (int, float))]
        if missing:
            d["error"] = "RESULT lacks the number(s) %s: %s" % (", ".join(missing), m[-1][:300])
        elif res["records"] < int(want):
            d["error"] = "processed %s of %s records: %s" % (res["records"], want, last_lines(text))
    d["status"] = "failed" if "error" in d else "ok"
    return d


def line(d):
    if d["status"] == "skipped":
        return "%s: skipped: %s" % (d["side"], d.get("error"))
    if d["status"] != "ok":
        return "%s: FAILED: %s" % (d["side"], d.get("error"))
    r = d["result"]
    return "%s: %s records, %.0f records/s, first record %.2f s, p50 %.1f ms, p99 %.1f ms, cpu %.2f s, rss %.0f MiB" % (
        d["side"], r["records"], r["records_per_sec"], r["first_record_s"], r["p50_ms"], r["p99_ms"],
        d.get("cpu_s", 0), d.get("rss_kb", 0) / 1024)


def med(rows, get):
    v = []
    for r in rows:
        if r.get("status") != "ok":
            continue
        x = get(r)
        if isinstance(x, (int, float)):
            v.append(x)
    return statistics.median(v) if v else None


def fmt(v, f="{:,.0f}"):
    return "-" if v is None else f.format(v)


def esc(s):
    return (s or "").replace("|", "\\|").replace("\n", " ")


def res(k):
    return lambda r: r.get("result", {}).get(k)


def report(run_dir, out):
    meta = json.load(open(os.path.join(run_dir, "meta.json")))
    rows = [json.loads(l) for l in open(os.path.join(run_dir, "results.jsonl")) if l.strip()]
    m = dict(meta)
    se, wm, sm, c = m["slow_every"], m["work_ms"], m["slow_ms"], m["concurrency"]
    # The sleeps alone: the mean sleep per record over the handlers that run at once.
    mean_sleep = ((se - 1) * wm + sm) / se if se > 0 else wm
    m["ceiling"] = c / mean_sleep * 1000 if mean_sleep > 0 else float("inf")
    m["mean_sleep"] = mean_sleep
    m["slow_rule"] = ("the record at offset *o* with (*o* + 1) %% %d = 0 sleeps %d ms instead" % (se, sm)) if se > 0 else "no record is slow"
    names = {
        "ceiling": "ceiling: the same handlers on records from memory, no Kafka (bench/src/ceiling.rs)",
        "ours": "**kafka-share processor engine** (`kafka_share::processor`)",
        "barrier": "kafka-share `ShareConsumer`, batch barrier (bench/src/barrier.rs)",
        "java": "Java `KafkaShareConsumer` %s + %d-thread pool (peers/java ProcessBench)" % (m["java_clients"], c),
    }
    args = "--records %d --peer-records %d --partitions %d --rounds %d --concurrency %d --work-ms %d --slow-every %d --slow-ms %d" % (
        m["records"], m["peer_records"], m["partitions"], m["rounds"], c, wm, se, sm)
    md = ["## Processing with concurrent handlers", ""]
    md.append("Written by `scripts/bench process` (`%s`, sides %s), run `%s`, commit `%s`%s, %d s. "
              "Do not edit by hand between the markers: run the script again." % (
                  args, m["sides"], m["run"], m["commit"], " (uncommitted changes)" if m.get("dirty") else "", m["duration"]))
    if m["smoke"]:
        md += ["", "**Smoke run (debug builds, a few thousand records): the figures mean nothing.**"]
    md += ["", (
        "One broker (`scripts/kafka up`, Kafka %(kafka)s), one topic (%(partitions)d partitions, values of %(size)d bytes) written by our "
        "producer; every side reads it in a share group of its own (`share.auto.offset.reset=earliest`), one side at a time, in one "
        "process with %(concurrency)d handlers running at once, explicit acknowledgement, ACCEPT per record. The simulated work is the "
        "same on every side: a record's handler sleeps %(work_ms)d ms, except that %(slow_rule)s. The processor engine processes "
        "%(records)d records; the two peers, which wait at every poll for the batch's slowest record, %(peer_records)d (compare "
        "records/s, not seconds)." % m), ""]
    md.append("- **ceiling**: `bench/src/ceiling.rs`: the engine's handler (`bench/src/work.rs`, the same "
              "sleeps on the same tokio timer) with %d slots, on the topic's records fed from memory as fast as a slot "
              "frees: no fetch, no acknowledgement. What the handlers allow on this machine in this run; its "
              "acquisition is the moment a slot takes the record." % c)
    md.append("- **processor engine**: `bench/src/process.rs` on `kafka_share::processor` (command: `%s`)." % esc(m["process_cmd"]))
    md.append("- **batch barrier**: the pattern of `examples/concurrent_workers.rs`: poll, one tokio task per record (a semaphore "
              "lets %d run), each acknowledges its record, wait for the whole batch, poll again." % c)
    md.append("- **Java**: `KafkaShareConsumer` (`org.apache.kafka:kafka-clients` %s, `share.acknowledgement.mode=explicit`, "
              "otherwise defaults), `-Xmx512m`: poll, submit every record to a fixed %d-thread `ExecutorService`, wait for every "
              "future of the batch, `acknowledge(record, ACCEPT)` each, `commitSync`, poll again." % (m["java_clients"], c))
    md.append("- **records/s**: the steady rate, records after the first over the time from the first record until the last "
              "acknowledgement is confirmed. **first record**: seconds from just before `subscribe` to the first record (the join). "
              "**acquisition -> outcome**: per record, from the return of the poll that handed it out to its acknowledge call. "
              "**CPU**: user+sys of the whole process (GNU time), start-up included. **peak RSS**: its maximum resident set. "
              "**largest poll**: the most records one poll returned. Figures are medians over the rounds.")
    md.append("- Fetching is each client's default (`max.poll.records` 500, `share.acquire.mode` batch_optimized): our "
              "`ShareConsumer` hands out at most 500 records a poll, Java's may hand out a whole acquired batch; "
              "**largest poll** shows what one poll returned, and a barrier loop waits for a slow record once per poll.")
    md.append("- The sleeps alone cap every side at %s records/s (%d handlers over a mean sleep of %.3f ms per record)." % (
        fmt(m["ceiling"]), c, mean_sleep))
    # The share-state warm-up's line (bench_warm_share_state), as the peers and sink reports
    # print it: what it took, or that it failed and what that means for the first side.
    warm = (" The brokers' warm-up before the first side (not measured): %s." % m["share_warm"]) if m.get("share_warm") else ""
    md += ["", "Topic: %s.%s Load average %s before, %s after; %d CPUs shared with other builds (expect noise of +-20%%)." % (
        m["produce"] or "?", warm, m["load_before"], m["load_after"], m["nproc"]), ""]
    md.append("| side | records | records/s (steady) | first record (s) | acquisition -> outcome p50 (ms) | p99 (ms) | CPU (s) "
              "| CPU ms / 1k records | peak RSS (MiB) | largest poll | result |")
    md.append("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|")
    by = {s: [r for r in rows if r["side"] == s] for s in SIDES + HALF_SIDES}
    for s in SIDES:
        rs = by[s]
        if not rs:
            continue
        ok = [r for r in rs if r["status"] == "ok"]
        if not ok:
            why = "; ".join(sorted({("skipped: " if r["status"] == "skipped" else "failed: ") + r.get("error", "?") for r in rs}))
            md.append("| %s | %s | | | | | | | | | %s |" % (names[s], fmt(rs[0]["want"]), esc(why)[:400]))
            continue
        cpu_per = med(rs, lambda r: r.get("cpu_s") and r["cpu_s"] / r["result"]["records"] * 1e6)
        md.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            names[s], fmt(med(rs, res("records"))), fmt(med(rs, res("records_per_sec"))), fmt(med(rs, res("first_record_s")), "{:.2f}"),
            fmt(med(rs, res("p50_ms")), "{:.1f}"), fmt(med(rs, res("p99_ms")), "{:.1f}"), fmt(med(rs, lambda r: r.get("cpu_s")), "{:.2f}"),
            fmt(cpu_per, "{:.2f}"), fmt(med(rs, lambda r: r.get("rss_kb") and r["rss_kb"] / 1024), "{:.1f}"),
            fmt(med(rs, res("max_batch"))), "ok" if len(ok) == len(rs) else "%d/%d ok" % (len(ok), len(rs))))

    def ratio(a, b, get):
        x, y = med(by[a], get), med(by[b], get)
        return None if x is None or not y else x / y
    rate = res("records_per_sec")
    rss = lambda r: r.get("rss_kb")  # noqa: E731
    md += ["", "| ours / ceiling (records/s) | ours / barrier (records/s) | ours / Java (records/s) | Java peak RSS / ours |",
           "|--:|--:|--:|--:|",
           "| %s | %s | %s | %s |" % (fmt(ratio("ours", "ceiling", rate), "{:.2f}x"), fmt(ratio("ours", "barrier", rate), "{:.2f}x"),
                                      fmt(ratio("ours", "java", rate), "{:.2f}x"), fmt(ratio("java", "ours", rss), "{:.1f}x"))]
    md += half_load(m, by, names)
    md += ["", "<details><summary>Every run</summary>", "",
           "| side | round | records | seconds | records/s | first (s) | p50 (ms) | p99 (ms) | max (ms) | polls | largest poll | CPU (s) | RSS (MiB) | load | result |",
           "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|"]
    for r in rows:
        x = r.get("result", {})
        md.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["side"], r["round"], fmt(x.get("records")), fmt(x.get("seconds"), "{:.2f}"), fmt(x.get("records_per_sec")),
            fmt(x.get("first_record_s"), "{:.2f}"), fmt(x.get("p50_ms"), "{:.1f}"), fmt(x.get("p99_ms"), "{:.1f}"),
            fmt(x.get("max_ms"), "{:.1f}"), fmt(x.get("polls")), fmt(x.get("max_batch")), fmt(r.get("cpu_s"), "{:.2f}"),
            fmt(r.get("rss_kb") and r["rss_kb"] / 1024, "{:.1f}"), fmt(r.get("load1"), "{:.1f}"),
            "ok" if r["status"] == "ok" else esc(r["status"] + ": " + r.get("error", ""))[:300]))
    md += ["", "</details>"]
    section.write(out, "bench-process", "\n".join(md))


def half_load(m, by, names):
    """The half-load table: p50/p99 acquisition -> outcome at a fixed rate, beside the handler's own time."""
    if not m.get("half_seconds"):
        return []
    out = ["", "### At half the ceiling's rate", ""]
    if not m.get("half_rate"):
        return out + ["Not run: it needs the sides ceiling and ours, the ceiling with a rate (`--half-load-seconds %d`)." % m["half_seconds"]]
    out.append(
        "Then both again at a fixed rate: %s records/s, half the ceiling's median above, for %d s (%s records). The engine reads a "
        "fresh topic that our producer (`linger.ms=0`) fills at that rate while it consumes (it joined on the empty topic 5 s "
        "before); the ceiling's records become available at that rate. **handler's own time**: the handler alone (the engine's "
        "`handler-time` histogram; the ceiling's exact figure). The engine's percentiles come from its histograms (bucket upper "
        "edges, powers of two microseconds: 1.02, 2.05, 4.1, 8.2 ms...), the ceiling's are exact." % (
            fmt(m["half_rate"]), m["half_seconds"], fmt(m["half_rate"] * m["half_seconds"])))
    out += ["", "| side | records/s (steady) | acquisition -> outcome p50 (ms) | p99 (ms) | handler's own time p50 (ms) | p50 minus handler (ms) | result |",
            "|---|--:|--:|--:|--:|--:|---|"]
    for s, base in (("ceiling-half", "ceiling"), ("ours-half", "ours")):
        rs = by.get(s, [])
        if not rs:
            continue
        ok = [r for r in rs if r["status"] == "ok"]
        if not ok:
            out.append("| %s | | | | | | %s |" % (names[base], esc("; ".join(r.get("error", "?") for r in rs))[:400]))
            continue
        p50, h50, rate = med(rs, res("p50_ms")), med(rs, res("handler_p50_ms")), med(rs, res("records_per_sec"))
        # A side that fell behind the rate measured a backlog, not half load: say so (0.8: a last slow
        # record ends a short run up to --slow-ms after the last record came).
        kept = "ok" if rate is not None and rate >= 0.8 * m["half_rate"] else "behind the rate (%s of %s records/s): a backlog, not half load" % (
            fmt(rate), fmt(m["half_rate"]))
        out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            names[base], fmt(med(rs, res("records_per_sec"))), fmt(p50, "{:.1f}"), fmt(med(rs, res("p99_ms")), "{:.1f}"),
            fmt(h50, "{:.1f}"), fmt(None if p50 is None or h50 is None or h50 < 0 else p50 - h50, "{:.1f}"), kept))
    return out


def half_rate(results):
    rows = [json.loads(l) for l in open(results) if l.strip()]
    r = med([x for x in rows if x["side"] == "ceiling"], res("records_per_sec"))
    return int(r / 2) if r and r >= 2 else 0


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "run" and len(argv) == 9:
        print(json.dumps(run(*argv[2:9])))
    elif cmd in ("skip", "fail") and len(argv) == 6:
        print(json.dumps(row(argv[2], argv[3], argv[4], error=argv[5], status="skipped" if cmd == "skip" else "failed")))
    elif cmd == "line":
        print(line(json.loads(sys.stdin.read())))
    elif cmd == "half-rate" and len(argv) == 3:
        print(half_rate(argv[2]))
    elif cmd == "report" and len(argv) == 4:
        report(argv[2], argv[3])
    elif cmd == "check" and len(argv) == 3:
        rows = [json.loads(l) for l in open(argv[2]) if l.strip()]
        bad = [r for r in rows if r["status"] == "failed"]
        for r in bad:
            print("bench-process: smoke: %s failed: %s" % (r["side"], r.get("error")), file=sys.stderr)
        ran = [r for r in rows if r["status"] == "ok"]
        if not ran:
            print("bench-process: smoke: no side ran", file=sys.stderr)
        return 1 if bad or not ran else 0
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
