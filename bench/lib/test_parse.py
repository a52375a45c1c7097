"""Tests of parse.py's CPU window, the one arithmetic on bench_cpu_snapshot's ticks (stdlib
unittest, no broker): `python3 bench/lib/test_parse.py`."""
import contextlib
import io
import os
import sys
import tempfile
import unittest

import parse

TICK = os.sysconf("SC_CLK_TCK")


def run_main(*args):
    out = io.StringIO()
    saved = sys.argv
    sys.argv = ["parse.py", *args]
    try:
        with contextlib.redirect_stdout(out):
            parse.main()
    finally:
        sys.argv = saved
    return out.getvalue().strip()


class CpuWindowTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "run.time.cpu")

    def tearDown(self):
        self.dir.cleanup()

    def snapshots(self, text):
        open(self.path, "w").write(text)

    def test_broker_seconds_and_busy_share(self):
        # Brokers 2 s of ticks; the machine busy 300 of 400 ticks.
        self.snapshots("100 1000 2000\n%d 1300 2400\n" % (100 + 2 * TICK))
        row = {}
        parse.cpu_window(row, self.path)
        self.assertEqual(row, {"broker_cpu_s": 2.0, "machine_busy": 0.75})
        self.assertEqual(run_main("cpu-window", self.path), "broker_cpu_s=2.0000 machine_busy=0.7500")

    def test_the_warm_up_pass_cost_per_million_records(self):
        self.snapshots("0 0 0\n%d 10 20\n" % (3 * TICK))
        self.assertEqual(run_main("broker-cpu-per-m", self.path, "2000000"), "1.50")

    def test_unreadable_snapshots_give_nothing(self):
        self.snapshots("100 1000 2000\n")  # the run failed before the second snapshot
        self.assertEqual(run_main("cpu-window", self.path), "")
        self.assertEqual(run_main("broker-cpu-per-m", self.path, "1000"), "")
        self.assertEqual(run_main("broker-cpu-per-m", os.path.join(self.dir.name, "missing"), "1000"), "")


if __name__ == "__main__":
    unittest.main()
