"""Measures and reports the runs of scripts/bench failover.

    failover.py run RUN_JSON EVENTS LOG_DIR     one run's figures, a JSON line on stdout
    failover.py line                            a JSON line (stdin) as one short line
    failover.py report RUN_DIR OUT              the markdown section into OUT
    failover.py check RESULTS                   exit 1 if a run failed (--smoke)

RUN_JSON (written by the script): client, run, records, plan (leaders, coordinator), victim,
kill_ms, restart_ms, served_ms, rc, error. EVENTS: the consumer's events file (see
kafka-share-bench failover, bench/src/failover.rs). LOG_DIR: the cluster's broker-N.log files, where the controller
writes when it fences the dead broker.
"""
import json
import os
import re
import statistics
import sys
from datetime import datetime

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import section  # noqa: E402

NAME = "bench-failover"
LOG_TS = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")


def log_ms(line):
    m = LOG_TS.match(line)
    if not m:
        return None
    # The brokers log in the machine's local time zone, which a naive datetime assumes.
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() * 1000.0


def fence_ms(log_dir, victim, after_ms):
    """When a controller fenced broker `victim` after `after_ms`: the earliest of the active
    controller's "Fencing broker N" and any node's replay of a registration change with
    fenced=1 for N; None if no log says so."""
    pats = [re.compile(r"Fencing broker %d\b" % victim),
            re.compile(r"BrokerRegistrationChangeRecord\(brokerId=%d, .*fenced=1\b" % victim)]
    best = None
    for name in sorted(os.listdir(log_dir)):
        if not re.match(r"broker-\d+\.log$", name):
            continue
        with open(os.path.join(log_dir, name), errors="replace") as f:
            for line in f:
                if "roker" not in line:
                    continue
                if any(p.search(line) for p in pats):
                    t = log_ms(line)
                    if t is not None and t >= after_ms and (best is None or t < best):
                        best = t
    return best


def read_events(path):
    ev = {"D": [], "F": [], "C": [], "S": None, "E": None}
    if not os.path.exists(path):
        return ev
    for line in open(path, errors="replace"):
        parts = line.rstrip("\n").split(" ", 4)
        if not parts or not parts[0]:
            continue
        k = parts[0]
        try:
            if k == "D":
                ev["D"].append((float(parts[1]), int(parts[2]), int(parts[3]), int(parts[4])))
            elif k == "F":
                rest = parts[4] if len(parts) > 4 else ""
                ev["F"].append((float(parts[1]), int(parts[2]), int(parts[3]), rest))
            elif k == "C":
                ev["C"].append((float(parts[1]), int(parts[2]), " ".join(parts[3:])))
            elif k == "S":
                ev["S"] = float(parts[1])
            elif k == "E":
                ev["E"] = (float(parts[1]), int(parts[2]), int(parts[3]))
        except (IndexError, ValueError):
            continue
    return ev


def longest_gap(times, start, end):
    """(gap, resumed at): the longest stretch in [start, end] without a time of `times`
    (sorted), and the time that ended it (None: it ran to `end`)."""
    last, best, resumed = start, 0.0, None
    for t in times:
        if t < start:
            continue
        if t > end:
            break
        if t - last > best:
            best, resumed = t - last, t
        last = t
    return best, resumed


def measure(run, events_path, log_dir):
    ev = read_events(events_path)
    row = {k: run.get(k) for k in ("client", "run", "records", "victim", "coordinator", "rc", "error")}
    leaders = {int(p): l for p, l in run["plan"]["leaders"].items()}
    victim, kill = run.get("victim"), run.get("kill_ms")
    row["dead_led"] = sorted(p for p, l in leaders.items() if l == victim)
    d = ev["D"]
    keys = [(p, o) for _, p, o, _ in d]
    distinct = len(set(keys))
    row.update(deliveries=len(d), distinct=distinct, lost=run["records"] - distinct,
               duplicated=len(d) - distinct, redelivered=sum(1 for x in d if x[3] > 1),
               max_delivery_count=max((x[3] for x in d), default=0),
               failed_ack_offsets=sum(x[2] for x in ev["F"] if x[2] >= 0),
               # franz-go's ack callback names partitions, not offsets (-1 offsets).
               failed_ack_offsets_unknown=sum(1 for x in ev["F"] if x[2] < 0),
               failed_ack_reports=len(ev["F"]),
               failed_ack_errors=sorted({re.sub(r"\d+", "N", x[3])[:120] for x in ev["F"]}),
               failed_commit_partitions=len(ev["C"]),
               commit_errors=sorted({re.sub(r"\d+", "N", x[2])[:120] for x in ev["C"]}))
    if ev["S"] and d:
        row["first_record_s"] = (d[0][0] - ev["S"]) / 1e3
        row["duration_s"] = (d[-1][0] - ev["S"]) / 1e3
    if kill is None or not d:
        row["ok"] = False
        row["error"] = row.get("error") or ("no kill" if kill is None else "no records")
        return row
    if run.get("restart_ms"):
        row["restart_after_kill_s"] = (run["restart_ms"] - kill) / 1e3
    fence = fence_ms(log_dir, victim, kill)
    row["fence_after_kill_s"] = None if fence is None else (fence - kill) / 1e3
    end = d[-1][0]
    times = sorted(t for t, _, _, _ in d)
    gap, resumed = longest_gap(times, times[0], end)
    row["stall_s"] = gap / 1e3
    row["stall_from_kill_s"] = None if resumed is None else (resumed - gap - kill) / 1e3
    row["delivered_before_kill"] = sum(1 for t in times if t <= kill)
    parts = {}
    for p in sorted(leaders):
        pt = sorted(t for t, pp, _, _ in d if pp == p)
        after = [t for t in pt if t > kill]
        if not after:
            parts[p] = {"led_by_victim": p in row["dead_led"], "drained_before_kill": True}
            continue
        g, r = longest_gap(pt, kill, after[-1])
        parts[p] = {"led_by_victim": p in row["dead_led"], "gap_s": g / 1e3,
                    "resumed_after_kill_s": None if r is None else (r - kill) / 1e3,
                    "resumed_after_fence_s": None if (r is None or fence is None) else (r - fence) / 1e3}
    row["partitions"] = parts
    for kind, dead in (("live", False), ("dead", True)):
        vals = [v["resumed_after_fence_s"] for v in parts.values()
                if v["led_by_victim"] == dead and v.get("resumed_after_fence_s") is not None]
        row[kind + "_resumed_after_fence_s"] = [min(vals), max(vals)] if vals else None
        ks = [v["resumed_after_kill_s"] for v in parts.values()
              if v["led_by_victim"] == dead and v.get("resumed_after_kill_s") is not None]
        row[kind + "_resumed_after_kill_s"] = [min(ks), max(ks)] if ks else None
    row["ok"] = run.get("rc") == 0 and distinct >= run["records"]
    if not row["ok"] and not row.get("error"):
        row["error"] = "%d of %d records (rc %s)" % (distinct, run["records"], run.get("rc"))
    return row


def rng(v, fmt="%.2f"):
    if not v:
        return "-"
    return fmt % v[0] if abs(v[1] - v[0]) < 0.005 else (fmt + "-" + fmt) % (v[0], v[1])


def s(v, fmt="%.2f"):
    return "-" if v is None else fmt % v


def line(row):
    if not row.get("ok") and "stall_s" not in row:
        return "%s run %s FAILED: %s" % (row.get("client"), row.get("run"), row.get("error"))
    return ("%s run %s: fence %s s after the kill, stall %s s, resumed after the fence: live-led %s s, dead-led %s s; "
            "redelivered %d, failed ack offsets %d, lost %d, duplicated %d%s") % (
        row["client"], row["run"], s(row.get("fence_after_kill_s")), s(row.get("stall_s")),
        rng(row.get("live_resumed_after_fence_s")), rng(row.get("dead_resumed_after_fence_s")),
        row["redelivered"], row["failed_ack_offsets"], row["lost"], row["duplicated"],
        "" if row.get("ok") else " FAILED: %s" % row.get("error"))


CLIENT_NAMES = {"ours": "kafka-share", "java": "Java `KafkaShareConsumer`", "go": "franz-go"}


def span(rows, key, idx=None):
    vals = []
    for r in rows:
        v = r.get(key)
        if v is None:
            continue
        vals.extend(v if idx is None and isinstance(v, list) else [v])
    return (min(vals), max(vals)) if vals else None


def failed_acks(rows):
    """Failed acknowledgement offsets over rows, or failed partition results ("p") where the
    client does not name offsets."""
    if any(r.get("failed_ack_offsets_unknown") for r in rows):
        return rng(span(rows, "failed_ack_offsets_unknown"), "%d") + " p"
    return rng(span(rows, "failed_ack_offsets"), "%d")


def report(run_dir, out):
    meta = json.load(open(os.path.join(run_dir, "meta.json")))
    rows = [json.loads(l) for l in open(os.path.join(run_dir, "results.jsonl")) if l.strip()]
    smoke = " (smoke run: the figures mean little)" if meta["smoke"] else ""
    b = ["## Failover: a broker killed under one consumer, side by side%s" % smoke, "",
         "Written by `scripts/bench failover` (`--runs %d --records %d --kill-at %d --restart-after %d`), run `%s`, "
         "%d s, %s builds of commit %s%s, Kafka %s, kafka-clients %s. Do not edit by hand: run the script again (the "
         "reading at the end comes from `bench/findings/failover.md`)." % (
             meta["runs"], meta["records"], meta["kill_at"], meta["restart_after"], meta["run"], meta["duration"],
             meta["profile"], meta["commit"], " with local changes" if meta["dirty"] else "", meta["kafka"],
             meta["java_clients"]), "",
         "Each run: the 3-broker cluster of `scripts/kafka up --nodes 3`, a fresh topic of 6 partitions (RF 3, "
         "`min.insync.replicas=2`) holding %s records written first, a fresh share group, one consumer in explicit "
         "mode that ACCEPTs every record and commits after every poll (`commit_sync` / `commitSync`, 100 ms polls, "
         "every other setting the client's default). After %s distinct records were accepted the script kills "
         "(`kill -9`) a broker that leads partitions but is not the group coordinator and starts it again %d s "
         "later; the run ends when all %s records were accepted. Clients alternate which goes first from run to run." % (
             "{:,}".format(meta["records"]), "{:,}".format(meta["kill_at"]), meta["restart_after"],
             "{:,}".format(meta["records"])), "",
         "**fence**: from the kill to the controller fencing the dead broker (the brokers' logs: `Fencing broker N` "
         "or the replayed registration change with `fenced=1`). **stall**: the longest time without any record "
         "delivered. **resumed after the fence**: per partition, the end of its longest gap after the kill, less the "
         "fence, over the partitions led by a live broker and over those the dead one led (range over the "
         "partitions). **redelivered**: deliveries with a delivery count above 1. **failed acks**: offsets the "
         "acknowledgement commit callback reported failed (franz-go's callback names partitions, not offsets: "
         "there, failed partition results, marked p). **lost**: records never delivered; **duplicated**: "
         "deliveries beyond the first of a record.", ""]
    clients = []
    for r in rows:
        if r["client"] not in clients:
            clients.append(r["client"])
    b += ["| client | runs ok | fence after kill (s) | stall (s) | live-led resumed after fence (s) | "
          "dead-led resumed after fence (s) | redelivered | failed acks | lost | duplicated |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    for c in clients:
        rs = [r for r in rows if r["client"] == c]
        ok = [r for r in rs if r.get("ok")]
        b.append("| %s | %d/%d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            CLIENT_NAMES.get(c, c), len(ok), len(rs), rng(span(rs, "fence_after_kill_s")), rng(span(rs, "stall_s")),
            rng(span(rs, "live_resumed_after_fence_s")), rng(span(rs, "dead_resumed_after_fence_s")),
            rng(span(rs, "redelivered"), "%d"), failed_acks(rs),
            rng(span(rs, "lost"), "%d"), rng(span(rs, "duplicated"), "%d")))
    b += ["", "Ranges are over the runs (and, for the resumption, the partitions).", "",
          "Per run:", "",
          "| client | run | victim (coordinator) | fence (s) | stall (s) | stall began (s after kill) | live-led resumed after fence (s) | "
          "dead-led resumed after fence (s) | redelivered | max delivery count | failed acks | failed commits | lost | duplicated |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b.append("| %s | %s | %s (%s) | %s | %s | %s | %s | %s | %d | %d | %s | %d | %d | %d |" % (
            CLIENT_NAMES.get(r["client"], r["client"]), r["run"], r.get("victim"), r.get("coordinator"),
            s(r.get("fence_after_kill_s")), s(r.get("stall_s")), s(r.get("stall_from_kill_s")),
            rng(r.get("live_resumed_after_fence_s")), rng(r.get("dead_resumed_after_fence_s")),
            r.get("redelivered", 0), r.get("max_delivery_count", 0), failed_acks([r]),
            r.get("failed_commit_partitions", 0), r.get("lost", 0), r.get("duplicated", 0)))
    errs = sorted({e for r in rows for e in r.get("failed_ack_errors", []) + r.get("commit_errors", [])})
    failed = [r for r in rows if not r.get("ok")]
    if errs:
        b += ["", "Errors reported to the application (numbers as N): " + "; ".join("`%s`" % e for e in errs) + "."]
    if failed:
        b += ["", "Failed runs: " + "; ".join("%s run %s: %s" % (r["client"], r["run"], r.get("error")) for r in failed) + "."]
    b.append("")
    analysis = os.path.join(os.path.dirname(HERE), "findings", "failover.md")
    if not meta["smoke"] and os.path.exists(analysis):
        b += [open(analysis).read().strip(), ""]
    section.write(out, NAME, "\n".join(b))


def main():
    cmd = sys.argv[1]
    if cmd == "run":
        run = json.load(open(sys.argv[2]))
        print(json.dumps(measure(run, sys.argv[3], sys.argv[4])))
    elif cmd == "line":
        print(line(json.loads(sys.stdin.read())))
    elif cmd == "report":
        report(sys.argv[2], sys.argv[3])
    elif cmd == "check":
        rows = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
        bad = [r for r in rows if not r.get("ok")]
        for r in bad:
            print("bench-failover: %s" % line(r), file=sys.stderr)
        sys.exit(1 if bad or not rows else 0)
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
