"""Tests of scripts/bench's one option parser (stdlib unittest, no broker):
`python3 bench/lib/test_entry.py`."""
import importlib.machinery
import importlib.util
import os
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PATH = os.path.join(HERE, "..", "..", "scripts", "bench")
_loader = importlib.machinery.SourceFileLoader("bench_entry", PATH)
_spec = importlib.util.spec_from_loader("bench_entry", _loader)
entry = importlib.util.module_from_spec(_spec)
_loader.exec_module(entry)


class EntryTest(unittest.TestCase):
    def test_every_case_declares_itself(self):
        known = entry.cases()
        self.assertEqual(sorted(known), ["exporter", "failover", "grid", "peers", "process", "scale", "sink"])
        self.assertIn("smoke", known["peers"][1])

    def test_common_options_go_to_the_environment_and_the_rest_to_the_case(self):
        known = entry.cases()
        env, rest = entry.parse(known["peers"], "peers",
                                ["--records", "500", "--clients", "ks-implicit", "--smoke", "--no-latency"])
        self.assertEqual(env, {"BENCH_OPT_RECORDS": "500", "BENCH_OPT_SMOKE": "1"})
        self.assertEqual(rest, ["--clients", "ks-implicit", "--no-latency"])

    def test_a_former_name_is_its_common_option(self):
        known = entry.cases()
        env, rest = entry.parse(known["exporter"], "exporter", ["--runs", "2", "--keep", "--debug"])
        self.assertEqual(env, {"BENCH_OPT_ROUNDS": "2", "BENCH_OPT_KEEP_TOPICS": "1"})
        self.assertEqual(rest, ["--debug"])

    def test_refused_before_anything_runs(self):
        known = entry.cases()
        with self.assertRaisesRegex(entry.UsageError, "takes no --records"):
            entry.parse(known["exporter"], "exporter", ["--records", "5"])
        with self.assertRaisesRegex(entry.UsageError, "whole number"):
            entry.parse(known["peers"], "peers", ["--rounds", "three"])
        with self.assertRaisesRegex(entry.UsageError, "needs a value"):
            entry.parse(known["peers"], "peers", ["--records"])
        with self.assertRaisesRegex(entry.UsageError, "1 to 9"):
            entry.parse(known["peers"], "peers", ["--nodes", "12"])


if __name__ == "__main__":
    unittest.main()
