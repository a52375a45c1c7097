"""The confluent-kafka-python peer of scripts/bench peers: confluent_kafka.ShareConsumer
(librdkafka), measured as bench/src/peers.rs is.

    target/bench-peers/venv/bin/python peers/python/share_bench.py consume --bootstrap B --topic T --group G --records N
        [--mode implicit|explicit] [--timeout-s 300]

Times from just before subscribe (the consumer is already created) until commit_sync
confirms the last acknowledgement; prints RESULT {json}.
"""
import argparse
import json
import sys
import time

from confluent_kafka import ShareConsumer


def die(msg):
    print(f"confluent-kafka bench: error: {msg}", file=sys.stderr)
    sys.exit(1)


def main():
    if len(sys.argv) < 2 or sys.argv[1] != "consume":
        die("usage: share_bench.py consume --bootstrap B --topic T --group G --records N")
    p = argparse.ArgumentParser()
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--records", type=int, required=True)
    p.add_argument("--mode", default="implicit", choices=["implicit", "explicit"])
    p.add_argument("--timeout-s", type=float, default=300)
    a = p.parse_args(sys.argv[2:])
    explicit = a.mode == "explicit"
    c = ShareConsumer({
        "bootstrap.servers": a.bootstrap,
        "group.id": a.group,
        "client.id": "confluent-kafka-python-bench",
        "share.acknowledgement.mode": a.mode,
    })
    start = time.perf_counter()
    deadline = start + a.timeout_s
    c.subscribe([a.topic])
    got = nbytes = 0
    first = 0.0
    while got < a.records and time.perf_counter() < deadline:
        msgs = c.poll(0.1)
        if not first and len(msgs):
            first = time.perf_counter() - start
        for m in msgs:
            if m.error() is not None:
                die(f"poll: {m.error()}")
            k, v = m.key(), m.value()
            nbytes += (len(k) if k else 0) + (len(v) if v else 0)
            if explicit:
                c.acknowledge(m)
            got += 1
    results = c.commit_sync(30)
    elapsed = time.perf_counter() - start
    failed = {str(tp): str(e) for tp, e in (results or {}).items() if e is not None}
    print("RESULT " + json.dumps({"records": got, "bytes": nbytes, "elapsed_s": round(elapsed, 4), "first_s": round(first, 4)}), flush=True)
    c.close()
    if failed:
        die(f"acknowledgement failed: {failed}")
    if got < a.records:
        die(f"timed out with {got} of {a.records} records")


if __name__ == "__main__":
    main()
