"""The fault suite's checker (history.check) on hand-made histories: a clean one passes, and
each property, violated once, is reported under its name — so the checker cannot pass a
fault run vacuously. No servers; runs in a second.

    python3 tests/integration/test_history_checker.py
    make integration T=test_history_checker
"""

from __future__ import annotations

import os
import tempfile
import unittest

from history import (FINISH_JOURNAL_S, PROPERTIES, Op, Window, check, load, pending, save)

U0 = 1_800_000_000_000  # unix ms at monotonic 0 in these histories


class Hist:
    """A history built by hand: times in seconds on both clocks (unix ms = U0 + t * 1000)."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.rows: list[tuple[str, str, int]] = []

    def _op(self, kind: str, inst: str, t0: float, t1: float, status: int, **kw) -> Op:
        op = Op(n=len(self.ops), kind=kind, inst=inst, t0=t0, t1=t1, u0=U0 + round(t0 * 1000),
                u1=U0 + round(t1 * 1000), status=status, **kw)
        self.ops.append(op)
        return op

    def push(self, p: int, jid: str | None, t: float, delay: int, status: int = 200, inst: str = "A",
             maybe: list[str] | None = None) -> Op:
        return self._op("push", inst, t, t + 0.01, status, pseq=p, topic="t", delay=delay, tries=3, id=jid,
                        run_at=U0 + round(t * 1000) + delay if status == 200 else None, maybe=maybe or [])

    def get(self, t: float, *jobs: tuple[str, int], inst: str = "B", status: int = 200, ttr: int = 4000) -> Op:
        """jobs: (id, push number); runAt is that push's, leaseUntil answer time + ttr."""
        answered = U0 + round((t + 0.01) * 1000)
        run_at = {op.pseq: op.run_at or op.u0 + (op.delay or 0) for op in self.ops if op.kind == "push"}
        js = [{"id": jid, "runAt": run_at.get(p, 0), "attempt": 1, "leaseUntil": answered + ttr, "p": p}
              for jid, p in jobs]
        return self._op("get", inst, t, t + 0.01, status, jobs=js)

    def finish(self, jid: str, t: float, status: int = 200, inst: str = "A") -> Op:
        return self._op("finish", inst, t, t + 0.01, status, id=jid, state="finished" if status == 200 else None)

    def delete(self, jid: str, t: float, status: int = 200, inst: str = "A") -> Op:
        return self._op("delete", inst, t, t + 0.01, status, id=jid, state="deleted" if status == 200 else None)

    def row(self, jid: str, state: str, p: int) -> None:
        self.rows.append((jid, state, p))


def clean() -> Hist:
    """Two jobs: one delivered on time and finished, one deleted before it was due."""
    h = Hist()
    h.push(1, "11", 0.0, 1000)
    h.push(2, "12", 0.1, 2000)
    h.delete("12", 0.5)
    h.get(1.1, ("11", 1))
    h.finish("11", 1.2)
    h.row("11", "finished", 1)
    h.row("12", "deleted", 2)
    return h


def window(**kw) -> Window:
    base = dict(name="fault", inject=0.3, heal=0.6, bound=1.0, losses=[], bystanders=[], recovered=0.2)
    base.update(kw)
    return Window(**base)


class CheckerTest(unittest.TestCase):

    def props(self, h: Hist, w: Window | None = None, rows=True) -> set[str]:
        verdict = check(h.ops, [w or window()], h.rows if rows else None, tries=3)
        for viol in verdict.violations:
            self.assertIn(viol.prop, PROPERTIES, viol)
            self.assertTrue(viol.detail, viol)
        return {viol.prop for viol in verdict.violations}

    def assertOnly(self, h: Hist, prop: str, w: Window | None = None) -> None:
        self.assertEqual(self.props(h, w), {prop}, check(h.ops, [w or window()], h.rows, tries=3).report())

    def test_a_clean_history_passes(self):
        h = clean()
        verdict = check(h.ops, [window()], h.rows, tries=3)
        self.assertTrue(verdict.ok, verdict.report())
        self.assertEqual((verdict.figures["acked"], verdict.figures["delivered"], verdict.figures["deleted"]), (2, 1, 1))
        self.assertEqual(verdict.figures["window_503_s"], "none")

    def test_lost(self):
        h = clean()
        h.push(3, "13", 0.2, 500)
        h.row("13", "ready", 3)
        self.assertOnly(h, "lost")

    def test_not_lost_when_a_delete_may_have_succeeded(self):
        h = clean()
        h.push(3, "13", 0.2, 500)
        h.delete("13", 0.35, status=503)   # during the fault: may have been carried out
        h.row("13", "deleted", 3)
        self.assertEqual(self.props(h), set())

    def test_early(self):
        h = Hist()
        h.push(1, "11", 0.0, 1000)
        h.get(0.8, ("11", 1))               # due at 1.0 s
        h.finish("11", 0.9)
        h.row("11", "finished", 1)
        self.assertOnly(h, "early")

    def test_early_by_the_real_clock_even_if_runat_says_otherwise(self):
        h = clean()
        push = h.push(3, "13", 0.2, 3000)
        push.run_at -= 2000                  # an instance whose clock is 2 s behind set the due time
        h.get(1.5, ("13", 3))
        h.finish("13", 1.6)
        h.row("13", "finished", 3)
        self.assertOnly(h, "early")

    def test_after_delete(self):
        h = clean()
        h.get(2.5, ("12", 2))               # due at 2.1 s, but deleted at 0.51 s
        self.assertOnly(h, "after_delete")

    def test_after_finish(self):
        h = clean()
        h.get(6.0, ("11", 1))               # past the lease: only the finish forbids it
        self.assertOnly(h, "after_finish")

    def test_after_finish_excused_by_a_redis_loss_just_after_it(self):
        h = clean()
        h.get(6.0, ("11", 1))
        self.assertEqual(self.props(h, window(losses=[(1.21 + FINISH_JOURNAL_S / 2,) * 2])), set())
        # a loss long after the finish was journaled does not excuse it
        self.assertEqual(self.props(h, window(losses=[(1.21 + FINISH_JOURNAL_S + 1,) * 2])), {"after_finish"})

    def test_lease(self):
        h = Hist()
        h.push(1, "11", 0.0, 0)
        h.get(0.1, ("11", 1))               # leased until 4.11 s
        h.get(2.0, ("11", 1))               # delivered again inside that lease
        h.finish("11", 2.1)
        h.row("11", "finished", 1)
        self.assertOnly(h, "lease")
        self.assertEqual(self.props(h, window(losses=[(1.0, 1.0)])), set(), "a Redis loss in between excuses it")

    def test_unique_two_rows_for_one_push(self):
        h = clean()
        h.row("77", "ready", 1)
        self.assertOnly(h, "unique")

    def test_unique_one_id_answered_to_two_pushes(self):
        h = clean()
        h.push(3, "11", 0.2, 0)
        self.assertIn("unique", self.props(h))

    def test_unique_an_id_twice_in_one_answer(self):
        h = Hist()
        h.push(1, "11", 0.0, 0)
        h.get(0.1, ("11", 1), ("11", 1))
        h.finish("11", 0.2)
        h.row("11", "finished", 1)
        self.assertIn("unique", self.props(h))

    def test_phantom(self):
        h = clean()
        h.push(4, None, 0.35, 0, status=503)    # 503 without maybeQueued: queued nothing
        h.get(0.5, ("14", 4))
        h.finish("14", 0.55)
        self.assertOnly(h, "phantom")

    def test_maybe_queued_is_not_a_phantom(self):
        h = clean()
        h.push(4, None, 0.35, 0, status=503, maybe=["14"])
        h.get(0.5, ("14", 4))
        h.finish("14", 0.55)
        h.row("14", "finished", 4)
        self.assertEqual(self.props(h), set())

    def test_final_state_deleted_without_a_delete(self):
        h = clean()
        h.rows[0] = ("11", "deleted", 1)
        self.assertOnly(h, "final_state")

    def test_final_state_finish_acknowledged_but_row_live(self):
        h = clean()
        h.rows[0] = ("11", "reserved", 1)
        self.assertOnly(h, "final_state")

    def test_final_state_acknowledged_push_without_row(self):
        h = clean()
        del h.rows[0]
        self.assertOnly(h, "final_state")

    def test_final_state_refused_push_left_live(self):
        h = clean()
        h.push(4, None, 0.35, 0, status=503)
        h.row("14", "delayed", 4)
        self.assertOnly(h, "final_state")

    def test_final_state_dead_too_soon(self):
        h = clean()
        h.push(3, "13", 0.2, 0)
        h.get(0.4, ("13", 3))
        h.row("13", "dead", 3)              # one delivery of 3 tries
        self.assertOnly(h, "final_state")

    def test_unavailable_after_the_bound(self):
        h = clean()
        h.get(5.0, status=503)              # heal 0.6 + bound 1.0
        self.assertOnly(h, "unavailable")

    def test_unavailable_before_the_fault(self):
        h = clean()
        h._op("push", "A", 0.05, 0.06, 0, pseq=9, topic="t", delay=0, tries=3)   # no answer
        self.assertOnly(h, "unavailable")

    def test_unavailable_on_a_bystander(self):
        h = clean()
        h.get(0.4, status=503, inst="B")
        self.assertOnly(h, "unavailable", window(bystanders=["B"]))
        h2 = clean()
        h2.get(0.4, status=503, inst="A")
        self.assertEqual(self.props(h2, window(bystanders=["B"])), set(), "the fault's own instance may 503")

    def test_status(self):
        h = clean()
        h._op("push", "A", 0.2, 0.21, 500, pseq=5, topic="t", delay=0, tries=3)
        self.assertOnly(h, "status")

    def test_recovery(self):
        self.assertOnly(clean(), "recovery", window(recovered=None))
        self.assertOnly(clean(), "recovery", window(recovered=5.0))
        self.assertOnly(clean(), "recovery", window(restored=False))
        stuck = {"status": "degraded", "stuck": [{"duty": "outbox", "shard": 2, "sinceMs": 9000, "error": "x"}]}
        self.assertOnly(clean(), "recovery", window(health_end={"A": stuck}))
        self.assertOnly(clean(), "recovery", window(health_end={"A": {"status": "unavailable"}}))

    def test_loss(self):
        named = {"A": {"status": "degraded", "redisLoss": {"shard": 3, "kind": "rolled back"}}, "B": {"status": "ok"}}
        self.assertOnly(clean(), "loss", window(health_end=named))
        self.assertOnly(clean(), "loss", window(health_end={"A": {"status": "ok", "fencedShards": 2}}))
        self.assertEqual(self.props(clean(), window(health_end={"A": {"status": "ok", "fencedShards": 0}})), set())

    def test_every_property_has_a_test(self):
        names = " ".join(n for n in dir(self) if n.startswith("test_"))
        for prop in PROPERTIES:
            self.assertIn(f"test_{prop}", names)

    def test_pending_and_save_load(self):
        h = clean()
        h.push(3, "13", 0.2, 500)
        self.assertEqual(pending(h.ops), {"13"})
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "h.jsonl")
            save(path, h.ops, [window()], h.rows)
            ops, windows, rows = load(path)
        self.assertEqual(ops, h.ops)
        self.assertEqual(windows, [window()])
        self.assertEqual([tuple(r) for r in rows], h.rows)


if __name__ == "__main__":
    unittest.main()
