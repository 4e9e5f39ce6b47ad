"""bench/report.py's verdicts and bench/summary.py's block, on small hand-written RESULTS.env files.

    make integration T=test_bench_report

No server: each test writes the key=value lines bench/run.sh records (bench/lateness.c's output
under a TAG_ prefix, wrk's figures), runs the report as run.sh does and reads its JSON. A row
measured under a load fails when any run under it lost jobs, had HTTP errors or had its producers
below 95 % of the rate asked of them, whatever its own value (issue 34, "Honest figures").
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPORT = os.path.join(ROOT, "bench", "report.py")
SUMMARY = os.path.join(ROOT, "bench", "summary.py")

# what every run records before its phases (bench/run.sh), a full run's sizes
BASE = {"mode": "full", "wrk_conns": "64", "sweep_conns": "64 512", "backlog_n": "1000000", "consume_n": "100000",
        "date": "2026-11-30 10:00:00 UTC", "commit": "abc1234", "tiers": "1", "far_n": "10000000",
        "farbig_far_rows": "10000000", "bucket_n": "1000000", "bucket_spread": "60000"}


def steady(tag, rate, p99, push_rate=None, pushed=None, received=None, push_errors=0, get_errors=0,
           finish_errors=0, asked=None):
    """The lines a steady run of bench/lateness.c leaves in RESULTS.env under TAG (rate_target,
    pushed, push_rate, received, the errors, ok, the lateness percentiles)."""
    pushed = rate * 30 if pushed is None else pushed
    received = pushed if received is None else received
    ok = int(received >= pushed and not (push_errors or get_errors or finish_errors))
    return {f"{tag}_rate_target": f"{asked or rate:.1f}", f"{tag}_duration": "30.0", f"{tag}_pushed": str(pushed),
            f"{tag}_push_errors": str(push_errors), f"{tag}_push_rate": f"{push_rate or rate:.1f}",
            f"{tag}_received": str(received), f"{tag}_finished": str(received),
            f"{tag}_finish_errors": str(finish_errors), f"{tag}_get_errors": str(get_errors),
            f"{tag}_redelivered": "0", f"{tag}_lat_ms_n": str(received), f"{tag}_lat_ms_p50": f"{p99 / 3:.3f}",
            f"{tag}_lat_ms_p99": f"{p99:.3f}", f"{tag}_lat_ms_max": f"{p99 * 2:.3f}", f"{tag}_ok": str(ok)}


def bucket(tag, n, p99, received=None, duplicates=0, get_errors=0):
    received = n if received is None else received
    ok = int(received >= n and not duplicates and not get_errors)
    return {f"{tag}_jobs": str(n), f"{tag}_received": str(received), f"{tag}_duplicates": str(duplicates),
            f"{tag}_finished": "0", f"{tag}_finish_errors": "0", f"{tag}_get_errors": str(get_errors),
            f"{tag}_rate": "16666.0", f"{tag}_lat_ms_n": str(received), f"{tag}_lat_ms_p50": "1.000",
            f"{tag}_lat_ms_p99": f"{p99:.3f}", f"{tag}_lat_ms_max": f"{p99 * 2:.3f}", f"{tag}_ok": str(ok)}


def drain(tag, jobs, rate, finished=None, get_errors=0):
    finished = jobs if finished is None else finished
    return {f"{tag}_jobs": str(jobs), f"{tag}_finished": str(finished), f"{tag}_received": str(finished),
            f"{tag}_finish_errors": "0", f"{tag}_get_errors": str(get_errors), f"{tag}_rate": f"{rate:.1f}",
            f"{tag}_ok": str(int(finished == jobs and not get_errors))}


def wrk(tag, rps, non2xx=0):
    return {f"{tag}_rps": f"{rps:.2f}", f"{tag}_requests": str(int(rps * 10)), f"{tag}_non2xx": str(non2xx),
            f"{tag}_socket_errors": "0", f"{tag}_lat_p99_ms": "5.0"}


def peers(add=40000.0, add_errors=0, worker=20000.0, completed=50000, failed=0):
    """What bench/run.sh's peers phase records from BullMQ's two scripts (the better run of each
    under the plain tag) and its own 64-consumer drains, figure 18."""
    return {"peers_n": "50000", "peers_conns": "64", "peers_bullmq_version": "5.81.5",
            "bmqadd_adds": str(int(add * 10)), "bmqadd_add_errors": str(add_errors), "bmqadd_rate": f"{add:.1f}",
            "bmqadd_ok": str(int(not add_errors)), "bmqadd_runs": f"{add - 500:.1f} {add:.1f}",
            "bmqwrk_jobs": "50000", "bmqwrk_completed": str(completed), "bmqwrk_failed": str(failed),
            "bmqwrk_rate": f"{worker:.1f}", "bmqwrk_ok": str(int(completed == 50000 and not failed))}


class ReportTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="hg-bench-report-")
        self.addCleanup(self.dir.cleanup)

    def report(self, *parts):
        """Run bench/report.py on RESULTS.env made of BASE and PARTS (later keys win, as in run.sh's
        file) and return its JSON's rows."""
        env = dict(BASE)
        for p in parts:
            env.update(p)
        path = os.path.join(self.dir.name, "results.env")
        with open(path, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in env.items())
        out = os.path.join(self.dir.name, "out.json")
        run = subprocess.run([sys.executable, REPORT, path, out, self.dir.name], capture_output=True, text=True,
                             timeout=60)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.table = run.stdout
        with open(out) as f:
            return json.load(f)["figures"]

    def row(self, rows, fig, name_start):
        found = [r for r in rows if r["figure"] == fig and r["name"].startswith(name_start)]
        self.assertEqual(len(found), 1, f"figure {fig} rows starting {name_start!r}: {[r['name'] for r in rows]}")
        return found[0]

    # ---- figure 4: p99 with a large backlog / with 1,000 pending, a ratio under a load

    def test_figure4_ratio_passes_when_both_loads_are_sound(self):
        r = self.row(self.report(steady("lat1k", 1000, 2.0), steady("latbig", 1000, 2.2)), 4, "p99 lateness")
        self.assertEqual(r["result"], "PASS")
        self.assertEqual(r["problems"], [])
        self.assertAlmostEqual(r["value"], 1.1, places=3)

    def test_figure4_ratio_fails_when_a_run_lost_jobs(self):
        rows = self.report(steady("lat1k", 1000, 2.0), steady("latbig", 1000, 2.2, pushed=30000, received=29988))
        r = self.row(rows, 4, "p99 lateness")
        self.assertEqual(r["result"], "FAIL")
        self.assertIn("1,000,000 pending: 12 jobs lost", r["notes"])
        # the latbig run's own row (no target) fails too, saying the same
        own = self.row(rows, 4, "lateness p50/p99/max @ 1,000/s, 1,000,000 pending")
        self.assertEqual(own["result"], "FAIL")
        self.assertIn("12 jobs lost", own["notes"])

    def test_figure4_ratio_fails_when_the_baseline_had_http_errors(self):
        rows = self.report(steady("lat1k", 1000, 2.0, get_errors=3), steady("latbig", 1000, 2.2))
        r = self.row(rows, 4, "p99 lateness")
        self.assertEqual(r["result"], "FAIL")
        self.assertIn("1,000 pending: 3 HTTP errors (get 3)", r["notes"])

    def test_figure4_ratio_fails_when_producers_fell_short(self):
        rows = self.report(steady("lat1k", 1000, 2.0), steady("latbig", 1000, 1.0, push_rate=910))
        r = self.row(rows, 4, "p99 lateness")
        self.assertEqual(r["result"], "FAIL")  # 0.5x would pass on p99 alone
        self.assertIn("producers at 91 % of the asked 1,000/s", r["notes"])

    def test_producers_at_95_percent_still_count(self):
        r = self.row(self.report(steady("lat1k", 1000, 2.0), steady("latbig", 1000, 2.0, push_rate=950)), 4,
                     "p99 lateness")
        self.assertEqual(r["result"], "PASS")

    # ---- figure 2: a lateness with its own target

    def test_figure2_fails_on_a_short_load_against_the_recorded_asked_rate(self):
        rows = self.report(steady("lat1k", 1000, 1.0), steady("lat5k", 5000, 8.0, push_rate=4550))
        self.assertEqual(self.row(rows, 2, "lateness p50/p99/max @ 1,000")["result"], "PASS")
        r = self.row(rows, 2, "lateness p50/p99/max @ 5,000")
        self.assertEqual(r["result"], "FAIL")
        self.assertEqual(r["problems"], ["producers at 91 % of the asked 5,000/s"])

    def test_a_lateness_row_reads_the_asked_rate_the_tool_recorded(self):
        # the tool was asked for 2,000/s under lat1k's name: 1,000/s achieved is half of it
        r = self.row(self.report(steady("lat1k", 1000, 1.0, asked=2000)), 2, "lateness p50/p99/max @ 1,000")
        self.assertEqual(r["result"], "FAIL")
        self.assertIn("producers at 50 % of the asked 2,000/s", r["notes"])

    # ---- figure 11: near lateness with far jobs / without

    def test_figure11_ratio(self):
        good = self.row(self.report(steady("tlat0", 1000, 2.5), steady("tlatbig", 1000, 2.6)), 11, "near p99")
        self.assertEqual(good["result"], "PASS")
        bad = self.row(self.report(steady("tlat0", 1000, 2.5, push_errors=7), steady("tlatbig", 1000, 2.6)), 11,
                       "near p99")
        self.assertEqual(bad["result"], "FAIL")
        self.assertIn("no far: 7 HTTP errors (push 7)", bad["notes"])

    # ---- figure 14: p99 during a purge / before and after

    def purge(self, **during):
        return ({"purge_n": "100000", "purge_status": "200", "purge_deleted": "100000", "purge_left": "0",
                 "purge_secs": "30.0", "purge_during_secs": "40", "plat_base_lat_ms_p99": "4.0"},
                steady("plat0", 1000, 4.0), steady("platp", 1000, 4.2, **during), steady("plat1", 1000, 3.9))

    def test_figure14_ratio(self):
        self.assertEqual(self.row(self.report(*self.purge()), 14, "lateness p99 during")["result"], "PASS")
        r = self.row(self.report(*self.purge(pushed=40000, received=39000)), 14, "lateness p99 during")
        self.assertEqual(r["result"], "FAIL")
        self.assertIn("during: 1,000 jobs lost (pushed 40,000, delivered 39,000)", r["notes"])

    # ---- figure 13: the bucket, beside the near load

    def bucket_parts(self, near=None, **kw):
        return (bucket("bucket", 1000000, 12.0, **kw), bucket("bucketn", 1000000, 11.0),
                steady("bpage", 1000, 3.0, **(near or {})), {"bpage_secs": "500"},
                steady("bpage0", 1000, 2.8), {"bpage0_secs": "90"})

    def test_figure13_rows_pass_on_sound_runs(self):
        rows = self.report(*self.bucket_parts())
        for name in ("lateness p50/p99/max, 1,000,000 far jobs", "near lateness p99, while",
                     "delivery lateness p99, paged / already"):
            self.assertEqual(self.row(rows, 13, name)["result"], "PASS", name)

    def test_figure13_fails_when_the_near_load_beside_it_fell_short(self):
        rows = self.report(*self.bucket_parts(near={"push_rate": 800}))
        for name in ("lateness p50/p99/max, 1,000,000 far jobs", "near lateness p99, while",
                     "delivery lateness p99, paged / already"):
            r = self.row(rows, 13, name)
            self.assertEqual(r["result"], "FAIL", name)
            self.assertTrue(any("producers at 80 % of the asked 1,000/s" in p for p in r["problems"]), r["problems"])

    def test_figure13_fails_when_the_bucket_lost_jobs(self):
        rows = self.report(*self.bucket_parts(received=999990))
        self.assertIn("10 jobs lost", self.row(rows, 13, "lateness p50/p99/max, 1,000,000 far jobs")["notes"])
        r = self.row(rows, 13, "delivery lateness p99, paged / already")
        self.assertEqual(r["result"], "FAIL")
        self.assertIn("paged: 10 jobs lost (999,990 of 1,000,000 delivered)", r["notes"])

    # ---- figure 17 and figure 1: the runs under a ratio of drains, of wrk runs

    def test_figure17_names_the_drain_that_failed(self):
        parts = (drain("plain", 100000, 6000), drain("plain2", 100000, 6100), drain("grouped", 100000, 5500),
                 drain("grouped2", 100000, 5600))
        self.assertEqual(self.row(self.report(*parts), 17, "get+finish jobs/s, 1,000 groups")["result"], "PASS")
        r = self.row(self.report(*parts, drain("grouped2", 100000, 5600, finished=99000)), 17,
                     "get+finish jobs/s, 1,000 groups")
        self.assertEqual(r["result"], "FAIL")
        self.assertIn("grouped2: 1,000 jobs not finished (99,000 of 100,000)", r["notes"])

    def test_figure1_peak_fails_when_any_run_of_the_sweep_had_errors(self):
        parts = (wrk("push", 20000), wrk("hello", 70000), wrk("push512c", 30000), wrk("hello512c", 70000))
        self.assertEqual(self.row(self.report(*parts), 1, "durable push / hello, peak")["result"], "PASS")
        r = self.row(self.report(*parts, wrk("hello", 70000, non2xx=5)), 1, "durable push / hello, peak")
        self.assertEqual(r["result"], "FAIL")
        self.assertIn("hello at 64: 5 non-2xx/socket errors", r["notes"])

    # ---- figure 18: hourglass beside BullMQ and beanstalkd

    def test_figure18_pushes_against_queue_add(self):
        rows = self.report(wrk("push", 30000), peers(add=25000))
        r = self.row(rows, 18, "durable pushes/s / BullMQ Queue.add/s")
        self.assertEqual(r["result"], "PASS")
        self.assertAlmostEqual(r["value"], 1.2, places=3)
        r = self.row(self.report(wrk("push", 30000), peers(add=40000)), 18, "durable pushes/s / BullMQ")
        self.assertEqual(r["result"], "FAIL")
        self.assertAlmostEqual(r["value"], 0.75, places=3)

    def test_figure18_push_ratio_fails_when_an_add_failed(self):
        r = self.row(self.report(wrk("push", 30000), peers(add=25000, add_errors=4)), 18, "durable pushes/s / BullMQ")
        self.assertEqual(r["result"], "FAIL")  # 1.2x would pass on the rates alone
        self.assertIn("BullMQ add: 4 adds failed", r["notes"])

    def test_figure18_deliveries_against_the_worker(self):
        parts = (peers(worker=20000), drain("pfn", 50000, 15000), drain("pgf", 50000, 12000))
        rows = self.report(*parts)
        self.assertEqual(self.row(rows, 18, "get?finish= jobs/s / BullMQ Worker")["result"], "PASS")  # 0.75x
        self.assertEqual(self.row(rows, 18, "get+finish jobs/s / BullMQ Worker")["result"], "info")
        r = self.row(self.report(*parts, drain("pfn", 50000, 13000)), 18, "get?finish= jobs/s / BullMQ Worker")
        self.assertEqual(r["result"], "FAIL")  # 0.65x
        r = self.row(self.report(*parts, peers(worker=20000, completed=49990)), 18,
                     "get?finish= jobs/s / BullMQ Worker")
        self.assertEqual(r["result"], "FAIL")
        self.assertIn("BullMQ Worker: 10 jobs not completed (49,990 of 50,000)", r["notes"])

    def beanstalk(self, hg_p99, bs_p99, **bs):
        return (steady("lat1k", 1000, hg_p99), steady("bslat1k", 1000, bs_p99, **bs), steady("bslat5k", 5000, 40.0),
                {"peers_n": "50000", "bsputfsync_rate": "10000.0", "bsputfsync_put_errors": "0",
                 "bsputnobinlog_rate": "120000.0", "bsputnobinlog_put_errors": "0"})

    def test_figure18_lateness_within_beanstalkd_p99_plus_1ms(self):
        name = "lateness p99 @ 1,000 jobs/s, hourglass / beanstalkd"
        self.assertEqual(self.row(self.report(*self.beanstalk(2.9, 2.0)), 18, name)["result"], "PASS")
        self.assertEqual(self.row(self.report(*self.beanstalk(3.1, 2.0)), 18, name)["result"], "FAIL")
        rows = self.report(*self.beanstalk(0.9, 2.0))
        self.assertEqual(self.row(rows, 18, "beanstalkd lateness p50/p99/max @ 5,000")["result"], "info")
        self.assertEqual(self.row(rows, 18, "beanstalkd put/s, 64 connections (binlog")["value"], 10000.0)

    def test_figure18_lateness_fails_when_beanstalkd_lost_jobs(self):
        rows = self.report(*self.beanstalk(0.9, 2.0, pushed=6000, received=5990))
        r = self.row(rows, 18, "lateness p99 @ 1,000 jobs/s, hourglass / beanstalkd")
        self.assertEqual(r["result"], "FAIL")
        self.assertIn("beanstalkd: 10 jobs lost (pushed 6,000, delivered 5,990)", r["notes"])
        self.assertEqual(self.row(rows, 18, "beanstalkd lateness p50/p99/max @ 1,000")["result"], "FAIL")

    def test_figure18_a_peer_that_could_not_run_is_skipped_with_the_reason(self):
        rows = self.report(wrk("push", 30000), steady("lat1k", 1000, 1.0),
                           {"peers_n": "50000", "peers_bullmq_skipped": "npm ci in bench/peers failed",
                            "peers_beanstalk_skipped": "beanstalkd is not installed"})
        for name in ("durable pushes/s / BullMQ", "get?finish= jobs/s / BullMQ", "lateness p99 @ 1,000 jobs/s, hour"):
            r = self.row(rows, 18, name)
            self.assertEqual(r["result"], "skip", name)
            self.assertIn("skipped: ", r["notes"])
        self.assertIn("npm ci in bench/peers failed", self.row(rows, 18, "durable pushes/s / BullMQ")["notes"])
        self.assertIn("not installed", self.row(rows, 18, "lateness p99 @ 1,000 jobs/s, hour")["notes"])

    def test_figure18_bullmq_lateness_is_information_unless_its_load_was_unsound(self):
        name = "BullMQ lateness p50/p99/max @ 1,000 jobs/s"
        r = self.row(self.report(peers(), steady("bmqlat1k", 1000, 90.0)), 18, name)
        self.assertEqual((r["result"], r["value"]["p99"]), ("info", 90.0))
        r = self.row(self.report(peers(), steady("bmqlat1k", 1000, 90.0, push_rate=800)), 18, name)
        self.assertEqual(r["result"], "FAIL")
        self.assertIn("producers at 80 % of the asked 1,000/s", r["notes"])

    def test_figure18_is_not_printed_when_the_phase_did_not_run(self):
        rows = self.report(wrk("push", 30000), steady("lat1k", 1000, 1.0))
        self.assertEqual([r for r in rows if r["figure"] == 18], [])

    def test_table_prints_the_reason(self):
        self.report(steady("lat1k", 1000, 2.0), steady("latbig", 1000, 2.2, pushed=30000, received=29988))
        line = [x for x in self.table.splitlines() if x.startswith("4  p99 lateness")][0]
        self.assertIn("FAIL", line)
        self.assertIn("12 jobs lost", line)


DOC = """# hourglass — performance

<!-- bench:summary:begin -->
old block, line 1
old block, line 2
<!-- bench:summary:end -->

Text after the block | with a pipe.

### 2026-11-29: a dated entry
```
1  durable push / hello, peak against peak   0.335  >= 0.40  FAIL
```
"""


class SummaryTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="hg-bench-summary-")
        self.addCleanup(self.dir.cleanup)
        self.doc = os.path.join(self.dir.name, "performance.md")
        with open(self.doc, "w", encoding="utf-8") as f:
            f.write(DOC)

    def results(self, mode="full", *more):
        env = dict(BASE, mode=mode)
        for p in (steady("lat1k", 1000, 2.0), steady("latbig", 1000, 2.2, pushed=30000, received=29988),
                  steady("lat5k", 5000, 8.0), wrk("push", 20000), wrk("hello", 70000)) + more:
            env.update(p)
        path = os.path.join(self.dir.name, "results.env")
        with open(path, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in env.items())
        out = os.path.join(self.dir.name, "20261130T100000Z.json")
        subprocess.run([sys.executable, REPORT, path, out, self.dir.name], check=True, capture_output=True,
                       timeout=60)
        return out

    def summary(self, *args):
        return subprocess.run([sys.executable, SUMMARY, *args], capture_output=True, text=True, timeout=60)

    def test_block_is_rewritten_between_its_markers_and_nothing_else_changes(self):
        run = self.summary(self.results(), self.doc, "--commit", "abc1234+dirty", "--date", "2026-11-30 10:01 UTC")
        self.assertEqual(run.returncode, 0, run.stderr)
        with open(self.doc, encoding="utf-8") as f:
            text = f.read()
        begin, end = "<!-- bench:summary:begin -->\n", "<!-- bench:summary:end -->\n"
        head, rest = DOC.split(begin)
        tail = rest.split(end)[1]
        self.assertTrue(text.startswith(head + begin), text[:200])
        self.assertTrue(text.endswith(end + tail), text[-300:])
        block = text[len(head + begin):-len(end + tail)]
        self.assertNotIn("old block", block)
        lines = block.splitlines()
        self.assertIn("**Latest full run of `make bench`: 2026-11-30 10:01 UTC, commit `abc1234+dirty`**", block)
        rows = {ln.split(" | ")[1]: ln for ln in lines if ln.startswith("| ") and not ln.startswith("| #")
                and not ln.startswith("|---")}
        self.assertIn("| 2 | lateness p50/p99/max @ 1,000 jobs/s | p99 ≤ 5 ms | 0.67 / 2.00 / 4.00 ms | PASS |",
                      lines)
        # a failed ratio says why, naming the run
        self.assertIn("**FAIL**: 1,000,000 pending: 12 jobs lost", rows["p99 lateness, 1,000,000 vs 1,000 pending"])
        # figures without a target show their headline; figures not run are named
        self.assertIn("| 0 | durable pushes/s, group commit | – | 20,000/s (p99 5.00 ms) | info |", lines)
        self.assertIn("not measured in this run", rows["restore into an empty Redis"])
        self.assertTrue(any(ln.startswith("Not measured in this run: ") and "14 (a purge beside live traffic)" in ln
                            for ln in lines), block)

    def test_figure18_rows_and_a_skipped_peers_reason(self):
        res = self.results("full", peers(add=25000), drain("pfn", 50000, 15000), drain("pgf", 50000, 12000),
                           {"peers_beanstalk_skipped": "beanstalkd is not installed"})
        self.assertEqual(self.summary(res, self.doc).returncode, 0)
        with open(self.doc, encoding="utf-8") as f:
            lines = f.read().splitlines()
        self.assertIn("| 18 | durable pushes/s / BullMQ Queue.add/s, 64 producers | ≥ 1.0x | 20,000 / 25,000 = "
                      "0.80x | **FAIL** |", lines)
        self.assertIn("| 18 | lateness p99 @ 1,000 jobs/s, hourglass / beanstalkd (binlog fsync every put) | ≤ "
                      "beanstalkd p99 + 1 ms | not measured in this run: beanstalkd skipped: beanstalkd is not "
                      "installed | – |", lines)

    def test_rewriting_twice_gives_the_same_file(self):
        res = self.results()
        for _ in range(2):
            self.assertEqual(self.summary(res, self.doc, "--commit", "c", "--date", "d").returncode, 0)
            with open(self.doc, encoding="utf-8") as f:
                text = f.read()
        self.assertEqual(self.summary(res, self.doc, "--commit", "c", "--date", "d").returncode, 0)
        with open(self.doc, encoding="utf-8") as f:
            self.assertEqual(f.read(), text)
        self.assertEqual(text.count("<!-- bench:summary:begin -->"), 1)

    def test_a_run_that_is_not_full_says_so(self):
        self.assertEqual(self.summary(self.results(mode="quick"), self.doc).returncode, 0)
        with open(self.doc, encoding="utf-8") as f:
            text = f.read()
        self.assertIn("**Newest run, NOT a full one (quick mode", text)
        self.assertIn("commit `abc1234`", text)  # the JSON's own, with no --commit

    def test_a_doc_without_its_markers_is_left_as_it_was(self):
        res = self.results()
        for broken in (DOC.replace("<!-- bench:summary:end -->\n", ""),
                       DOC.replace("<!-- bench:summary:begin -->\n", "<!-- bench:summary:begin -->\n" * 2),
                       "<!-- bench:summary:end -->\nx\n<!-- bench:summary:begin -->\n"):
            with open(self.doc, "w", encoding="utf-8") as f:
                f.write(broken)
            run = self.summary(res, self.doc)
            self.assertEqual(run.returncode, 1)
            self.assertIn("left as it was", run.stderr)
            with open(self.doc, encoding="utf-8") as f:
                self.assertEqual(f.read(), broken)

    def test_the_repos_doc_has_its_block(self):
        # docs/performance.md opens with the block: its markers once each, before the dated log
        with open(os.path.join(ROOT, "docs", "performance.md"), encoding="utf-8") as f:
            text = f.read()
        b, e = text.find("<!-- bench:summary:begin -->"), text.find("<!-- bench:summary:end -->")
        self.assertEqual(text.count("<!-- bench:summary:begin -->"), 1)
        self.assertEqual(text.count("<!-- bench:summary:end -->"), 1)
        self.assertTrue(0 < b < e < text.find("\n### 2026-"))
        self.assertIn("| # | figure | target | latest | result |", text[b:e])


if __name__ == "__main__":
    unittest.main()
