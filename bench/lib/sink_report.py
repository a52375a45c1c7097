"""The report of `scripts/bench sink` (bench/cases/sink): its section of the report file.

    sink_report.py RESULTS OUT KEY=VALUE...

RESULTS is the run's results.jsonl (one JSON line per run of a side: bench/cases/sink's
`result`), OUT the file whose bench-sink section is replaced (section.py). The KEY=VALUE
arguments are the run's facts, every key of FIELDS once; the shell passes them as words, so
no value is ever read as code (the report was a Python heredoc inside the shell script once,
where a backquote in a comment ran a command).
"""
import heapq
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import section  # noqa: E402

# The facts of a run the report needs: key -> its type. record_locks is empty when
# --record-locks was not given (Kafka's default, 2000, then applies); warm is --warm's line,
# share_warm bench_warm_share_state's (bench/lib/common.sh).
FIELDS = {
    "run": str, "commit": str, "kafka": str, "connect_version": str,
    "records": int, "hol_records": int, "size": int, "partitions": int, "rounds": int,
    "smoke": int, "duration": int, "slow_every": int, "slow_ms": int, "hol_factor": int,
    "plain_tasks": int, "log_batch": int, "record_locks": str,
    "produce": str, "json_produce": str, "hol_produce": str, "log_batch_why": str,
    "load_before": str, "load_after": str, "warm": str, "share_warm": str,
}
KAFKA_RECORD_LOCKS = 2000


class ReportError(Exception):
    """Arguments this script refuses; the message says which and what to give."""


def parse_meta(args):
    """The run's facts from KEY=VALUE words, typed as FIELDS says."""
    meta = {}
    for arg in args:
        key, eq, value = arg.partition("=")
        if not eq or key not in FIELDS:
            raise ReportError("sink_report.py: '%s' is no KEY=VALUE of a known key (%s)" % (arg, ", ".join(FIELDS)))
        if key in meta:
            raise ReportError("sink_report.py: %s given twice" % key)
        try:
            meta[key] = FIELDS[key](value)
        except ValueError:
            raise ReportError("sink_report.py: %s takes a whole number (got '%s')" % (key, value)) from None
    missing = [k for k in FIELDS if k not in meta]
    if missing:
        raise ReportError("sink_report.py: missing %s" % ", ".join("%s=..." % k for k in missing))
    locks = meta["record_locks"]
    if locks and not locks.isdigit():
        raise ReportError("sink_report.py: record_locks takes a whole number or nothing (got '%s')" % locks)
    meta["record_locks_set"] = bool(locks)
    meta["record_locks"] = int(locks) if locks else KAFKA_RECORD_LOCKS
    return meta


METHOD = """One broker (`scripts/kafka up`), one topic of %(records)d records (values of %(size)d bytes, `x` repeated, no key; %(partitions)d partitions) written by our producer. Before the first round the broker is warmed (`--warm`: %(warm)s; share groups by our consumer, classic groups by Kafka's `ConsumerPerformance`; not measured): a fresh broker serves share fetches slower for its first ~20M records. Each side reads the whole topic into a file in a group of its own, one run at a time; a run ends when the file holds every record (watched by size every 10 ms), then the process gets SIGTERM.

- **Kafka Connect**: `ConnectStandalone` from `org.apache.kafka:connect-runtime` %(connect_version)s (peers/java-connect), classic consumer group `connect-<name>`, `tasks.max` = %(partitions)d (one task per partition; more would sit idle), keys through `ByteArrayConverter`, values through `StringConverter`, JVM options as `connect-standalone.sh` sets them (`-Xms256M -Xmx2G`, G1). The connector is our `BenchFileSinkConnector`, which writes what `FileStreamSinkConnector` writes, the same way (a `PrintStream` in append mode, `println(value)` per record): the registry here does not serve connect-file.
- **kafka-share**: plain case, the `kafka-share-sink` binary (`connector.class=file`, `tasks.max` = %(plain_tasks)d, `share.consumers.max` = %(plain_tasks)d: a consumer per task, as Connect runs its tasks); head-of-line case, `bench/src/sink.rs` (the library API: `Worker` with the built-in file sink wrapped in a slow one), %(hol_tasks)d tasks (%(hol_factor)dx Connect's). Share group, explicit acknowledgement (ACCEPT after `put`).
- **Head-of-line case**: on both sides the record at offset *o* sleeps %(slow_ms)d ms in `put` before it is written when (*o* + 1) %% %(slow_every)d = 0: the same records, one in %(slow_every)d. A Connect task that sleeps holds up its whole partition; a share-group task that sleeps holds up only its own batch. The sleeps alone keep Connect busy for at least %(connect_floor).1f s and ours for at least %(ours_floor).1f s (the sleep total over the task count), so the sleeps alone make a ratio of %(hol_factor)dx; what is above it comes from the rest of the work not waiting behind a sleep (in Connect it waits: the sleeping task's partition stands still).
- **JSON with two transforms** (json-transforms): a second topic of as many records, JSON objects of about %(size)d bytes (record *n*: `{"id":n,"name":"customer-n","amount":m.25,"tag":"tk","note":"xx.."}`, the note padding it), read on both sides with `value.converter=org.apache.kafka.connect.json.JsonConverter`, `value.converter.schemas.enable=false` and `transforms=insert,replace`: `InsertField$Value` (`static.field=source`, `static.value=bench`) and `ReplaceField$Value` (`exclude=tag`, `renames=name:customer`), the same connector lines on both sides, %(partitions)d tasks on both (Connect's count); ours is the `kafka-share-sink` binary as in the plain case. Connect's file sink prints the transformed `Map` (Java's `toString`), ours prints it as JSON, so this case's runs end when the file holds every record by lines, not bytes.
- **records/s**: records divided by the time from the first line in the file to the last, the steady rate (JVM start, group join and Connect's rebalance are in **first line**, seconds from the process start). **CPU s / M records**: user+sys of the whole process (GNU time), start-up and clean shutdown included, per million records. **peak RSS**: its maximum resident set (GNU time). Figures are medians over the rounds."""


def med(rs, k):
    v = [r[k] for r in rs if r.get("ok") and r.get(k) is not None]
    return statistics.median(v) if v else None

def fmt(v, f="{:,.0f}"):
    return "-" if v is None else f.format(v)

def window_schedule(batch, locks, every, sleep, n=300000):
    # One partition of the hol case under the broker's window (SharePartition): a fetch
    # acquires whole log batches while end - start + 1 < locks (the last one crosses the
    # line); start is the first offset not acknowledged. Every record but the slow ones
    # ((o + 1) % every == 0, acknowledged `sleep` s after their acquisition) is acknowledged
    # the moment it is acquired: no round trip, no task limit. Records/s of the partition.
    t, start, end, due, acked = 0.0, 0, -1, [], set()
    while start < n:
        while end + 1 < n and end - start + 1 < locks:
            first, end = end + 1, min(end + batch, n - 1)
            for o in range(first, end + 1):
                if (o + 1) % every == 0:
                    heapq.heappush(due, (t + sleep, o))
                else:
                    acked.add(o)
        while start in acked:
            acked.discard(start)
            start += 1
        if start >= n or (end - start + 1 < locks and end + 1 < n):
            continue
        t, o = heapq.heappop(due)
        acked.add(o)
        while due and due[0][0] <= t:
            acked.add(heapq.heappop(due)[1])
    return n / t if t > 0 else float("inf")


def render(rows, meta):
    """The section's text (between its markers) for the rows of results.jsonl."""
    meta = dict(meta)
    meta["hol_tasks"] = meta["hol_factor"] * meta["partitions"]
    meta["connect_floor"] = meta["hol_records"] / meta["partitions"] / meta["slow_every"] * meta["slow_ms"] / 1000
    meta["ours_floor"] = meta["connect_floor"] / meta["hol_factor"]
    CASES = {"plain": "plain file sink", "json-transforms": "JSON, JsonConverter + InsertField + ReplaceField", "hol": "head-of-line (1 record in %d sleeps %d ms)" % (meta["slow_every"], meta["slow_ms"])}
    SIDES = {"connect": "Kafka Connect %s standalone (classic group)" % meta["connect_version"], "ours": "kafka-share sink runtime (share group)",
             "consumer": "kafka-share `ShareConsumer` alone, explicit ACCEPT, no sink (the share-fetch bound)"}
    agg = {}
    for r in rows:
        agg.setdefault((r["case"], r["side"]), []).append(r)
    md = ["## Sink runtime vs Kafka Connect", ""]
    hol_arg = " --hol-records %d" % meta["hol_records"] if meta["hol_records"] != meta["records"] else ""
    md.append("Written by `scripts/bench sink` (`--records %d%s --size %d --partitions %d --rounds %d`), run `%s`, commit `%s`, %d s. "
              "Do not edit by hand between the markers: run the script again." % (meta["records"], hol_arg, meta["size"], meta["partitions"], meta["rounds"], meta["run"], meta["commit"], meta["duration"]))
    if meta["smoke"]:
        md.append("")
        md.append("**Smoke run: the figures mean nothing.**")
    md += ["", METHOD % meta, ""]
    # The share-state warm-up's line (bench_warm_share_state), as the peers report prints it:
    # what it took, or that it failed and what that means for the figures.
    md += ["Topic: %s.%s%s%s Load average %s before, %s after." % (meta["produce"] or "?", (" JSON topic: %s." % meta["json_produce"]) if meta["json_produce"] else "",
            (" Head-of-line topic (`--hol-records`, its own: the sleeps make Connect's side ~50x slower than the plain case): %s." % meta["hol_produce"]) if meta["hol_produce"] else "",
            (" The brokers' warm-up before the first round (not measured): %s." % meta["share_warm"]) if meta["share_warm"] else "",
            meta["load_before"], meta["load_after"]), ""]
    md.append("| case | side | tasks | records/s | first line (s) | CPU s / M records | peak RSS (MB) | lines | result |")
    md.append("|---|---|--:|--:|--:|--:|--:|--:|---|")
    ORDER = ("plain", "hol", "json-transforms")
    for c in ORDER:
        for s in ("connect", "ours", "consumer"):
            rs = agg.get((c, s))
            if not rs:
                continue
            ok = [r for r in rs if r.get("ok")]
            cpu = med(rs, "cpu_s")
            rss = med(rs, "rss_kb")
            res = "ok" if len(ok) == len(rs) else "; ".join(r.get("error", "").replace("|", "\\|") for r in rs if not r.get("ok"))[:300]
            md.append("| %s | %s | %d | %s | %s | %s | %s | %s | %s |" % (
                CASES[c], SIDES[s], rs[0]["tasks"], fmt(med(rs, "rate")), fmt(med(rs, "first_s"), "{:.1f}"),
                fmt(cpu and cpu / (meta["hol_records"] if c == "hol" else meta["records"]) * 1e6, "{:.2f}"), fmt(rss and rss / 1024, "{:.0f}"), fmt(med(rs, "lines")), res))
    md += ["", "Ours / Connect (aims from issue 13: records/s at least 2x in the plain case and 5x in the head-of-line case, peak RSS under 0.1x; from issue 38: at least 2x with JSON and two transforms, peak RSS under 0.1x):", ""]
    md.append("| case | records/s | CPU per record | peak RSS |")
    md.append("|---|--:|--:|--:|")
    pairs = 0
    for c in ORDER:
        a, b = agg.get((c, "ours"), []), agg.get((c, "connect"), [])
        def ratio(k):
            x, y = med(a, k), med(b, k)
            return None if x is None or not y else x / y
        if a and b:
            md.append("| %s | %s | %s | %s |" % (CASES[c], fmt(ratio("rate"), "{:.2f}x"), fmt(ratio("cpu_s"), "{:.2f}x"), fmt(ratio("rss_kb"), "{:.2f}x")))
            pairs += 1
    if not pairs:
        md.append("| (no case was run on both sides) | | | |")
    # The limits beside the figures: the share fetch (plain) and the broker's window (hol).
    md += ["", "Against their limits (same run; aims from issue 36: plain sink at least 0.9x our consumer, head-of-line at least 0.9x the window bound):", ""]
    md.append("| case | limit | limit records/s | ours records/s | ours / limit |")
    md.append("|---|---|--:|--:|--:|")
    sink_p, cons_p = med(agg.get(("plain", "ours"), []), "rate"), med(agg.get(("plain", "consumer"), []), "rate")
    if agg.get(("plain", "consumer")):
        md.append("| %s | our `ShareConsumer` alone on the same topic, explicit ACCEPT (steady: first record to the confirmation of the last acknowledgement; the sink's clock stops at its last line) | %s | %s | %s |" % (
            CASES["plain"], fmt(cons_p), fmt(sink_p), fmt(None if sink_p is None or not cons_p else sink_p / cons_p, "{:.2f}x")))
    # The cores: the sink does more work per record than the consumer on the same two cores,
    # which the broker shares; where they are all busy, each side's rate is near its CPU bound.
    ncpu = os.cpu_count() or 1
    def cpu_side(s):
        rs = [r for r in agg.get(("plain", s), []) if r.get("ok") and r.get("cpu_s") and r.get("broker_cpu_s") is not None and r.get("lines")]
        if not rs:
            return None
        client = statistics.median(r["cpu_s"] / r["lines"] * 1e6 for r in rs)
        broker = statistics.median(r["broker_cpu_s"] / r["lines"] * 1e6 for r in rs)
        busy = [r["machine_busy"] for r in rs if r.get("machine_busy") is not None]
        return dict(client=client, broker=broker, busy=statistics.median(busy) if busy else None,
                    bound=ncpu / (client + broker) * 1e6 if client + broker > 0 else None)
    cpu_sink, cpu_cons = cpu_side("ours"), cpu_side("consumer")
    if cpu_sink and cpu_cons and cpu_sink["bound"] and cpu_cons["bound"]:
        allowed = cpu_sink["bound"] / cpu_cons["bound"]
        md.append("| %s | the two cores, shared with the broker: %d / (the sink's CPU per record %.2f s / M + the broker's for it %.2f), the rate if the machine did nothing else (our consumer's, the same way: %s records/s, its rate %s of it) | %s | %s | %s |" % (
            CASES["plain"], ncpu, cpu_sink["client"], cpu_sink["broker"], fmt(cpu_cons["bound"]),
            fmt(None if cons_p is None else cons_p / cpu_cons["bound"], "{:.2f}x"), fmt(cpu_sink["bound"]), fmt(sink_p), fmt(None if sink_p is None else sink_p / cpu_sink["bound"], "{:.2f}x")))
        need = (cpu_cons["client"] + cpu_cons["broker"]) / 0.9 - cpu_sink["broker"]
        CPU_NOTE = ("Where the cores are the bound (the machine %s busy during the sink's run, %s during the consumer's), they allow the sink **%.2fx** of our consumer's rate: "
                    "the two bounds' ratio, (%.2f + %.2f) / (%.2f + %.2f) CPU s per million records, consumer and its broker over sink and its broker. "
                    "0.9x would need the sink at %.2f CPU s per million records or less at this broker cost (it took %.2f; the consumer %.2f)." % (
                        fmt(cpu_sink["busy"] and 100 * cpu_sink["busy"], "{:.0f}%"), fmt(cpu_cons["busy"] and 100 * cpu_cons["busy"], "{:.0f}%"), allowed,
                        cpu_cons["client"], cpu_cons["broker"], cpu_sink["client"], cpu_sink["broker"], need, cpu_sink["client"], cpu_cons["client"]))
    else:
        CPU_NOTE = None
    json_p = med(agg.get(("json-transforms", "ours"), []), "rate")
    if json_p is not None and sink_p:
        md.append("| %s | our plain file sink in the same run (the same runtime without converter and transforms: what JSON parsing, the two transforms and JSON printing cost) | %s | %s | %s |" % (
            CASES["json-transforms"], fmt(sink_p), fmt(json_p), fmt(json_p / sink_p, "{:.2f}x")))
    if "hol" in {c for c, _ in agg}:
        L, B, P, T, N = meta["record_locks"], meta["log_batch"], meta["partitions"], meta["slow_ms"], meta["slow_every"]
        hol = med(agg.get(("hol", "ours"), []), "rate")
        locks = "%d (%s)" % (L, "set on our groups" if meta["record_locks_set"] else "Kafka's default")
        if not B:
            md.append("| %s | the broker's window: not computed (%s) | - | %s | - |" % (CASES["hol"], meta["log_batch_why"] or "no log batch size", fmt(hol)))
        elif T <= 0 or N <= 0 or N > L + B:
            md.append("| %s | the broker's window: no bound (a slow record does not fall in every window: 1 in %d, window %d + %d) | - | %s | - |" % (CASES["hol"], N, L, B, fmt(hol)))
        else:
            bound = P * (L + B) / (T / 1000)
            md.append("| %s | the broker's window: %d partitions x (`share.partition.max.record.locks` %s + log batch %d records, the median in the broker's log) per %d ms sleep | %s | %s | %s |" % (
                CASES["hol"], P, locks, B, T, fmt(bound), fmt(hol), fmt(None if hol is None else hol / bound, "{:.2f}x")))
            played = P * window_schedule(B, L, N, T / 1000)
            md.append("| %s | the same window rule played out record by record (log batches of %d; a fetch acquires whole batches while the last acquired offset is less than %d past the first unacknowledged one; every record but the slow ones acknowledged the moment it is acquired, no round trip, unlimited tasks): the sleeps that start later keep pinning the window, so it moves less than %d records per sleep | %s | %s | %s |" % (
                CASES["hol"], B, L, L + B, fmt(played), fmt(hol), fmt(None if hol is None else hol / played, "{:.2f}x")))
    if CPU_NOTE:
        md += ["", CPU_NOTE]
    md += ["", "<details><summary>Every run</summary>", "",
           "| case | side | round | tasks | records/s | first line (s) | last line (s) | CPU (s) | broker CPU (s) | busy | RSS (MB) | lines | load | result |",
           "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|"]
    for r in rows:
        md.append("| %s | %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["case"], r["side"], r["round"], r["tasks"], fmt(r.get("rate")), fmt(r.get("first_s"), "{:.2f}"),
            fmt(r.get("elapsed_s"), "{:.2f}"), fmt(r.get("cpu_s"), "{:.2f}"), fmt(r.get("broker_cpu_s"), "{:.2f}"),
            fmt(r.get("machine_busy") and 100 * r["machine_busy"], "{:.0f}%"), fmt(r.get("rss_kb") and r["rss_kb"] / 1024, "{:.0f}"),
            fmt(r.get("lines")), fmt(r.get("load1"), "{:.1f}"), "ok" if r.get("ok") else r.get("error", "").replace("|", "\\|")[:300]))
    md += ["", "</details>", ""]
    return "\n".join(md)


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    results, out = argv[0], argv[1]
    try:
        meta = parse_meta(argv[2:])
    except ReportError as e:
        sys.exit(str(e))
    rows = [json.loads(l) for l in open(results) if l.strip()]
    # The findings, written by hand for the run they name, follow in BENCHMARKS.md
    # (bench/findings/sink.md, bench/lib/render.py).
    section.write(out, "bench-sink", render(rows, meta))


if __name__ == "__main__":
    main(sys.argv[1:])
