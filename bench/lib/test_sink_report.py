"""Tests of sink_report.py, the report of `scripts/bench sink` (stdlib unittest, no broker):
`python3 bench/lib/test_sink_report.py`."""
import os
import tempfile
import unittest

import sink_report

ARGS = {
    "run": "20261205T190000Z", "commit": "0123456", "kafka": "4.4.0", "connect_version": "4.4.0",
    "records": "1000", "hol_records": "1000", "size": "100", "partitions": "3", "rounds": "1",
    "smoke": "0", "duration": "42", "slow_every": "1000", "slow_ms": "200", "hol_factor": "8",
    "plain_tasks": "3", "log_batch": "500", "record_locks": "",
    "produce": "produced 1000 records", "json_produce": "", "hol_produce": "", "log_batch_why": "",
    "load_before": "1.00 1.00 1.00", "load_after": "2.00 2.00 2.00", "warm": "none",
    "share_warm": "2 pass(es) of 1000 records",
}


def words(**over):
    return ["%s=%s" % (k, over.get(k, v)) for k, v in ARGS.items()]


def row(case, side, **kw):
    d = {"case": case, "side": side, "round": 1, "tasks": 3, "lines": 1000, "rate": 5000.0,
         "first_s": 1.0, "elapsed_s": 2.0, "cpu_s": 1.5, "rss_kb": 20480, "load1": 1.0}
    d.update(kw)
    d["ok"] = "error" not in d
    return d


class MetaTest(unittest.TestCase):
    def test_typed_as_fields_says(self):
        meta = sink_report.parse_meta(words())
        self.assertEqual(meta["records"], 1000)
        self.assertEqual(meta["commit"], "0123456")  # digits stay a string
        self.assertEqual((meta["record_locks"], meta["record_locks_set"]), (2000, False))

    def test_record_locks_given(self):
        # The heredoc made this `True2500`, a NameError: the report of a --record-locks run died.
        meta = sink_report.parse_meta(words(record_locks="2500"))
        self.assertEqual((meta["record_locks"], meta["record_locks_set"]), (2500, True))

    def test_a_value_is_never_code(self):
        meta = sink_report.parse_meta(words(produce='"""`sleep 9` $(x) a=b'))
        self.assertEqual(meta["produce"], '"""`sleep 9` $(x) a=b')

    def test_refused_with_what_to_give(self):
        with self.assertRaisesRegex(sink_report.ReportError, "missing warm=..."):
            sink_report.parse_meta([w for w in words() if not w.startswith("warm=")])
        with self.assertRaisesRegex(sink_report.ReportError, "'color=red' is no KEY=VALUE of a known key"):
            sink_report.parse_meta(words() + ["color=red"])
        with self.assertRaisesRegex(sink_report.ReportError, "records takes a whole number"):
            sink_report.parse_meta(words(records="many"))
        with self.assertRaisesRegex(sink_report.ReportError, "run given twice"):
            sink_report.parse_meta(words() + ["run=x"])
        with self.assertRaisesRegex(sink_report.ReportError, "record_locks takes a whole number or nothing"):
            sink_report.parse_meta(words(record_locks="lots"))


class RenderTest(unittest.TestCase):
    def render(self, rows, **over):
        return sink_report.render(rows, sink_report.parse_meta(words(**over)))

    def test_ratios_and_limits(self):
        text = self.render([row("plain", "connect", rate=1000.0), row("plain", "ours", rate=2500.0),
                            row("plain", "consumer", rate=5000.0, tasks=1)])
        self.assertIn("| plain file sink | 2.50x | 1.00x | 1.00x |", text)
        self.assertIn("| 5,000 | 2,500 | 0.50x |", text)
        self.assertIn("Kafka Connect 4.4.0 standalone (classic group)", text)
        self.assertNotIn("Smoke run", text)

    def test_an_error_cannot_break_the_table(self):
        text = self.render([row("plain", "ours", error="exit 1: a | b")])
        self.assertIn("exit 1: a \\| b", text)
        self.assertIn("| (no case was run on both sides) | | | |", text)

    def test_head_of_line_window(self):
        text = self.render([row("hol", "ours", tasks=24)], record_locks="2500")
        self.assertIn("2500 (set on our groups) + log batch 500 records", text)
        self.assertIn("played out record by record", text)
        text = self.render([row("hol", "ours", tasks=24)], log_batch="0", log_batch_why="no log segment")
        self.assertIn("the broker's window: not computed (no log segment)", text)

    def test_smoke_says_its_figures_mean_nothing(self):
        self.assertIn("**Smoke run: the figures mean nothing.**", self.render([], smoke="1"))

    def test_share_warm_up_is_reported(self):
        text = self.render([])
        self.assertIn("The brokers' warm-up before the first round (not measured): 2 pass(es) of 1000 records. Load average", text)
        self.assertNotIn("warm-up before", self.render([], share_warm=""))


class MainTest(unittest.TestCase):
    def test_writes_the_section(self):
        with tempfile.TemporaryDirectory() as d:
            results, out = os.path.join(d, "results.jsonl"), os.path.join(d, "report.md")
            open(results, "w").write('{"case": "plain", "side": "ours", "round": 1, "tasks": 3, "ok": true, "rate": 10.0}\n\n')
            open(out, "w").write("# Before\n")
            sink_report.main([results, out] + words())
            text = open(out).read()
        self.assertTrue(text.startswith("# Before\n\n<!-- bench-sink:begin -->\n## Sink runtime vs Kafka Connect\n"))
        self.assertTrue(text.endswith("<!-- bench-sink:end -->\n"))


if __name__ == "__main__":
    unittest.main()
