"""Turns one client run of scripts/bench peers into one JSON line (stdout).

    parse.py run CLIENT ROUND LOG TIMEFILE RC RECORDS SIZE LOAD
    parse.py skip CLIENT ROUND REASON
    parse.py latency CLIENT LOG RC [LOAD] [RATE]
    parse.py latency-skip CLIENT REASON
    parse.py cpu-window CPUFILE                      (key=value words for a shell's row)
    parse.py broker-cpu-per-m CPUFILE RECORDS        (the warm-up's cost of a pass)

A run's log holds either our harness line `RESULT {json}` (kafka-share, peers/*), or the
CSV of Kafka's ShareConsumerPerformance / ConsumerPerformance (header with
data.consumed.in.nMsg). GNU time wrote "%e %U %S %M" (wall, user, sys, max RSS KB).
"""
import json
import os
import re
import sys


def last_lines(text, n=4):
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", l).strip() for l in text.splitlines()]
    lines = [l for l in lines if l and not l.startswith("RESULT ")]
    # Prefer lines that say what went wrong.
    errs = [l for l in lines if re.search(r"error|exception|fail|refused|unsupported|panic|timed out|warning", l, re.I)]
    pick = (errs or lines)[-n:]
    return " | ".join(pick)[:600] or "no output"


def parse_tool_csv(text):
    lines = text.splitlines()
    for i, l in enumerate(lines):
        if "data.consumed.in.nMsg" in l and i + 1 < len(lines):
            head = [h.strip() for h in l.split(",")]
            for v in lines[i + 1:]:
                vals = [x.strip() for x in v.split(",")]
                if len(vals) == len(head):
                    d = dict(zip(head, vals))
                    n = int(float(d["data.consumed.in.nMsg"]))
                    rate = float(d["nMsg.sec"])
                    out = {
                        "records": n,
                        "bytes": int(float(d["data.consumed.in.MB"]) * 1024 * 1024),
                        "elapsed_s": n / rate if rate > 0 else None,
                        "first_s": None,
                    }
                    if "rebalance.time.ms" in d:
                        out["first_s"] = float(d["rebalance.time.ms"]) / 1000
                    return out
    return None


def cpu_window(row, path):
    """The brokers' CPU seconds over the client's run and the machine's busy share of that
    time, from the two lines of bench_cpu_snapshot (bench/lib/common.sh) around it."""
    try:
        before, after = (list(map(int, l.split())) for l in open(path).read().splitlines()[:2])
    except (OSError, ValueError):
        return
    tick = os.sysconf("SC_CLK_TCK")
    row["broker_cpu_s"] = (after[0] - before[0]) / tick
    if after[2] > before[2]:
        row["machine_busy"] = (after[1] - before[1]) / (after[2] - before[2])


def run(client, rnd, log, timefile, rc, records, size, load):
    text = open(log, errors="replace").read()
    row = {"client": client, "round": int(rnd), "load1": float(load), "rc": int(rc)}
    try:
        t = [l for l in open(timefile).read().splitlines() if re.match(r"^[0-9.]+ [0-9.]+ [0-9.]+ [0-9]+$", l)]
        wall, user, sys_, rss = t[-1].split()
        row.update(wall_s=float(wall), user_s=float(user), sys_s=float(sys_), rss_kb=int(rss))
        row["cpu_s"] = row["user_s"] + row["sys_s"]
    except (OSError, IndexError, ValueError):
        pass
    res = None
    m = re.findall(r"^RESULT (\{.*\})\s*$", text, re.M)
    if m:
        res = json.loads(m[-1])
    else:
        res = parse_tool_csv(text)
    if res:
        row.update({k: res.get(k) for k in ("records", "bytes", "elapsed_s", "first_s")})
        if row.get("elapsed_s"):
            row["rate"] = row["records"] / row["elapsed_s"]
            row["mb_s"] = row["records"] * int(size) / row["elapsed_s"] / 1e6
    # Our consumer's own account of its fetches (kafka-share-bench consume, bench/src/peers.rs, from the
    # consumer's metrics): how many ShareFetch requests, records per answer, and the round
    # trip (send to answer, the broker's wait included). The evidence bench-grid reads.
    f = re.findall(r"bench_consumer: ([0-9.]+) ShareFetch requests \(([0-9.]+) records each\), "
                   r"latency avg ([0-9.]+) ms max ([0-9.]+) ms", text)
    if f:
        n, per, avg, mx = (float(x) for x in f[-1])
        row.update(fetches=int(n), records_per_fetch=per, fetch_avg_ms=avg, fetch_max_ms=mx)
    cpu_window(row, timefile + ".cpu")
    want = int(records)
    if int(rc) == 124 or int(rc) == 137:
        row["error"] = f"killed by the run timeout (exit {rc}); last output: {last_lines(text)}"
    elif int(rc) != 0:
        row["error"] = f"exit {rc}: {last_lines(text)}"
    elif not res:
        row["error"] = f"no result line in the output: {last_lines(text)}"
    elif (res.get("records") or 0) < want:
        row["error"] = f"consumed {res.get('records')} of {want} records: {last_lines(text)}"
    row["ok"] = "error" not in row and "rate" in row
    if row["ok"] and "cpu_s" in row:
        row["cpu_per_m"] = row["cpu_s"] / row["records"] * 1e6
        if "broker_cpu_s" in row:
            row["broker_cpu_per_m"] = row["broker_cpu_s"] / row["records"] * 1e6
            # The rate if the machine's cores did nothing but this client and its brokers,
            # at the CPU both spent per record: the bound on a machine whose cores are busy.
            spent = row["cpu_s"] + row["broker_cpu_s"]
            if spent > 0:
                row["cpu_bound"] = (os.cpu_count() or 1) * row["records"] / spent
    print(json.dumps(row))


def latency(client, log, rc, load=None, rate=None):
    text = open(log, errors="replace").read()
    m = re.findall(r"^LATENCY (\{.*\})\s*$", text, re.M)
    row = {"client": client, "rc": int(rc)}
    if rate is not None:
        row["rate"] = int(rate)
    if load is not None:
        row["load1"] = float(load)
    if m:
        row.update(json.loads(m[-1]))
    if int(rc) != 0 or not m:
        row["error"] = f"exit {rc}: {last_lines(text)}"
    row["ok"] = "error" not in row
    print(json.dumps(row))


def main():
    a = sys.argv[1:]
    if a[0] == "run":
        run(*a[1:])
    elif a[0] == "skip":
        print(json.dumps({"client": a[1], "round": int(a[2]), "ok": False, "skipped": True, "error": a[3]}))
    elif a[0] == "latency":
        latency(*a[1:])
    elif a[0] == "cpu-window":
        # key=value words for a shell's result line (bench/cases/sink): nothing if unreadable.
        row = {}
        cpu_window(row, a[1])
        print(" ".join(f"{k}={v:.4f}" for k, v in row.items()))
    elif a[0] == "broker-cpu-per-m":
        # The brokers' CPU seconds per million records between the two snapshots (the
        # warm-up's passes, bench/lib/common.sh): nothing if unreadable.
        row = {}
        cpu_window(row, a[1])
        if "broker_cpu_s" in row and int(a[2]) > 0:
            print("%.2f" % (row["broker_cpu_s"] / int(a[2]) * 1e6))
    elif a[0] == "latency-skip":
        print(json.dumps({"client": a[1], "ok": False, "skipped": True, "error": a[2]}))
    else:
        sys.exit(f"parse.py: unknown mode {a[0]}")


if __name__ == "__main__":
    main()
