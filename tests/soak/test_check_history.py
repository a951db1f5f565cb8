#!/usr/bin/env python3
"""test_check_history.py: the soak's checker catches what it claims to.

Feeds check_history.py made-up histories (each written to a file and
judged by the checker's own command line) and asserts which checks it
reports: a clean history passes; an overlap, a reused token and a lost
release are each reported; and the ambiguous outcomes it must not count
(an unanswered acquire, a retried release) are not reported.  Group locks
(semaphores, shared locks): as many holders as the limit allows pass,
one more is reported; shared leases overlap freely, an exclusive one
beside them is reported; each such test fails on a checker that ignores
limits and modes (it would report the allowed overlaps) as on one that
ignores exclusion on groups (it would report none).
Run: python3 -m unittest tests/soak/test_check_history.py (or directly).
"""
import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_history  # noqa: E402


def acq(c, lock, i, e, st=200, key=None, lid=None, tok=None, ttl=5, xin=None,
        htok=None, ra=None, wait=0, mode=None, lim=None, shown=None):
    """An acquire record; MODE and LIM as sent (None: not sent), SHOWN the
    (mode, limit) its 200 shows (default: what was asked)."""
    r = {"c": c, "op": "acquire", "lock": lock, "i": i, "e": e, "st": st,
         "key": key or "key-" + c, "rttl": ttl, "wait": wait}
    if mode is not None:
        r["mode"] = mode
    if lim is not None:
        r["lim"] = lim
    if st == 200:
        r.update(lid=lid, tok=tok, ttl=ttl, xin=ttl if xin is None else xin,
                 ri=max(1, ttl // 8))
        if mode is not None or lim is not None:
            r["amode"], r["alim"] = shown or (
                (mode, None) if mode == "shared" else
                (mode or "exclusive", lim or 1))
    if htok is not None:
        r.update(htok=htok, code="locked", ra="1")
    if ra is not None:
        r["ra"] = ra
    if st is None:
        r["err"] = "timeout"
    return r


def ref(c, lock, i, e, lid, st=200, tok=None, ttl=5, code=None):
    r = {"c": c, "op": "refresh", "lock": lock, "i": i, "e": e, "st": st,
         "lid": lid}
    if st == 200:
        r.update(tok=tok, ttl=ttl, xin=ttl)
    if code:
        r["code"] = code
    return r


def rel(c, lock, i, e, lid, st=204, code=None):
    r = {"c": c, "op": "release", "lock": lock, "i": i, "e": e, "st": st,
         "lid": lid}
    if code:
        r["code"] = code
    return r


def insp(c, lock, i, e, st=200, tok=None):
    r = {"c": c, "op": "inspect", "lock": lock, "i": i, "e": e, "st": st}
    if tok is not None:
        r["tok"] = tok
    return r


# A clean history: two clients take turns on one lock (the second waits
# behind a 409), one refresh, releases, and a later inspect of a free lock.
CLEAN = [
    acq("a", "hot", 0.00, 0.01, lid="L1", tok="10"),
    acq("b", "hot", 0.02, 0.03, st=409, htok="10", ra="5"),
    ref("a", "hot", 1.00, 1.01, "L1", tok="10"),
    rel("a", "hot", 1.50, 1.51, "L1"),
    acq("b", "hot", 1.60, 1.61, lid="L2", tok="11"),
    rel("b", "hot", 2.00, 2.01, "L2"),
    insp("b", "hot", 2.10, 2.11, st=404),
    # a lease let run out, then the lock taken by another: fine
    acq("a", "cold", 3.00, 3.01, lid="L3", tok="20", ttl=2),
    acq("b", "cold", 6.50, 6.51, lid="L4", tok="21"),
    rel("b", "cold", 6.60, 6.61, "L4"),
]


class CheckerTest(unittest.TestCase):
    def judge(self, recs, store="file", crashes=(), extra=()):
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl",
                                         delete=False) as f:
            f.write(json.dumps({"meta": {"store": store}}) + "\n")
            for r in list(recs) + list(crashes):
                f.write(json.dumps(r) + "\n")
            path = f.name
        try:
            out = io.StringIO()
            with redirect_stdout(out):
                rc = check_history.main(["--json", *extra, path])
            summary = json.loads(out.getvalue())
        finally:
            os.unlink(path)
        return rc, summary

    def assertOnly(self, recs, check, n=1, **kw):
        rc, s = self.judge(recs, **kw)
        self.assertEqual(rc, 1, s)
        self.assertEqual(s["by_check"][check], n, s)
        others = {k: v for k, v in s["by_check"].items() if k != check and v}
        self.assertEqual(others, {}, s)
        return s

    def test_clean_history_passes(self):
        rc, s = self.judge(CLEAN)
        self.assertEqual(rc, 0, s)
        self.assertEqual(s["violations"], 0)
        self.assertEqual(s["grants"], 4)
        self.assertEqual(s["leases"], {"released": 3, "expired": 1})

    def test_overlap_is_reported(self):
        recs = [
            acq("a", "hot", 0.00, 0.01, lid="L1", tok="10"),
            # granted at 2 s while L1 was told valid until 0 + 5 - 1 = 4 s
            acq("b", "hot", 2.00, 2.01, lid="L2", tok="11"),
        ]
        self.assertOnly(recs, "overlap")

    def test_overlap_counts_from_the_last_refresh(self):
        recs = [
            acq("a", "hot", 0.00, 0.01, lid="L1", tok="10"),
            ref("a", "hot", 3.00, 3.01, "L1", tok="10"),
            # after the acquire's told expiry (4 s), inside the refresh's (7 s)
            acq("b", "hot", 5.00, 5.01, lid="L2", tok="11"),
        ]
        self.assertOnly(recs, "overlap")

    def test_within_the_margin_is_no_overlap(self):
        recs = [
            acq("a", "hot", 0.00, 0.01, lid="L1", tok="10"),
            acq("b", "hot", 4.10, 4.20, lid="L2", tok="11"),
        ]
        rc, s = self.judge(recs)
        self.assertEqual(rc, 0, s)

    def test_reused_token_is_reported(self):
        recs = [
            acq("a", "hot", 0.00, 0.01, lid="L1", tok="10"),
            rel("a", "hot", 0.50, 0.51, "L1"),
            acq("b", "hot", 1.00, 1.01, lid="L2", tok="10"),
            rel("b", "hot", 1.50, 1.51, "L2"),
        ]
        # The same token, granted later, is also out of order on file://.
        rc, s = self.judge(recs)
        self.assertEqual(s["by_check"]["token_reused"], 1, s)
        self.assertEqual(rc, 1)
        # On gs:// the order is only reported; the reuse still fails.
        rc, s = self.judge(recs, store="gs")
        self.assertEqual(s["by_check"]["token_reused"], 1, s)
        self.assertEqual(s["by_check"]["token_order"], 0, s)
        self.assertEqual(rc, 1)

    def test_token_order_fails_on_file_only(self):
        recs = [
            acq("a", "hot", 0.00, 0.01, lid="L1", tok="10"),
            rel("a", "hot", 0.50, 0.51, "L1"),
            acq("b", "hot", 1.00, 1.01, lid="L2", tok="9"),
            rel("b", "hot", 1.50, 1.51, "L2"),
        ]
        self.assertOnly(recs, "token_order", store="file")
        rc, s = self.judge(recs, store="gs")
        self.assertEqual(rc, 0, s)
        self.assertEqual(s["stats"]["token_order_inversions"], 1)
        self.assertIn("did NOT always increase", s["notes"][0])

    def test_lost_release_is_reported(self):
        # Released (204) at 1.01, yet a 409 sent later shows its token.
        recs = [
            acq("a", "hot", 0.00, 0.01, lid="L1", tok="10"),
            rel("a", "hot", 1.00, 1.01, "L1"),
            acq("b", "hot", 1.10, 1.11, st=409, htok="10", ra="3"),
        ]
        self.assertOnly(recs, "lost_release")

    def test_lost_release_seen_by_inspect_or_refresh(self):
        recs = [
            acq("a", "hot", 0.00, 0.01, lid="L1", tok="10", ttl=30),
            rel("a", "hot", 1.00, 1.01, "L1"),
            insp("b", "hot", 1.10, 1.11, tok="10"),
            ref("a", "hot", 1.20, 1.21, "L1", tok="10", ttl=30),
        ]
        self.assertOnly(recs, "lost_release", n=2)

    def test_a_409_overlapping_the_release_is_not_a_lost_release(self):
        recs = [
            acq("a", "hot", 0.00, 0.01, lid="L1", tok="10"),
            rel("a", "hot", 1.00, 1.01, "L1"),
            acq("b", "hot", 0.99, 1.05, st=409, htok="10", ra="3"),
        ]
        rc, s = self.judge(recs)
        self.assertEqual(rc, 0, s)

    def test_unanswered_acquire_is_not_a_grant(self):
        # b's acquire got no answer: it may hold the lock, unknown to all.
        # A 409 showing an unknown token is explained by it, not a phantom,
        # and a's grant after it is no overlap.
        recs = [
            acq("b", "hot", 0.00, 0.50, st=None),
            acq("c", "hot", 0.60, 0.61, st=409, htok="77", ra="4"),
            acq("a", "hot", 7.00, 7.01, lid="L1", tok="80"),
            rel("a", "hot", 7.50, 7.51, "L1"),
        ]
        rc, s = self.judge(recs)
        self.assertEqual(rc, 0, s)
        self.assertEqual(s["grants"], 1)
        self.assertEqual(s["stats"]["holders_explained_by_ambiguity"], 1)

    def test_revealed_ambiguous_grant_counts_from_its_answer(self):
        recs = [
            acq("b", "hot", 0.00, 0.50, st=None, key="kb"),
            acq("b", "hot", 1.00, 1.01, key="kb", lid="L1", tok="10"),
            acq("a", "hot", 2.00, 2.01, lid="L2", tok="11"),
        ]
        s = self.assertOnly(recs, "overlap")
        self.assertEqual(s["grants"], 2)

    def test_phantom_holder_is_reported(self):
        recs = [
            acq("a", "hot", 0.00, 0.01, st=409, htok="99", ra="2"),
        ]
        self.assertOnly(recs, "phantom")

    def test_retried_release_may_find_the_lease_gone(self):
        recs = [
            acq("a", "hot", 0.00, 0.01, lid="L1", tok="10", ttl=30),
            rel("a", "hot", 1.00, 1.50, "L1", st=None),
            rel("a", "hot", 2.00, 2.01, "L1", st=404, code="lease_not_found"),
        ]
        rc, s = self.judge(recs)
        self.assertEqual(rc, 0, s)

    def test_lease_lost_before_its_expiry_is_reported(self):
        recs = [
            acq("a", "hot", 0.00, 0.01, lid="L1", tok="10", ttl=30),
            ref("a", "hot", 3.00, 3.01, "L1", st=409, code="lease_lost"),
        ]
        self.assertOnly(recs, "lost_early")

    def test_stalled_holder_told_lease_lost_is_fine(self):
        recs = [
            acq("a", "hot", 0.00, 0.01, lid="L1", tok="10"),
            acq("b", "hot", 0.10, 6.50, lid="L2", tok="11", wait=10),
            ref("a", "hot", 8.00, 8.01, "L1", st=409, code="lease_lost"),
            rel("b", "hot", 9.00, 9.01, "L2"),
        ]
        rc, s = self.judge(recs)
        self.assertEqual(rc, 0, s)

    def test_revived_lease_is_reported(self):
        recs = [
            acq("a", "hot", 0.00, 0.01, lid="L1", tok="10", ttl=2),
            acq("b", "hot", 4.00, 4.01, lid="L2", tok="11", ttl=2),
            rel("b", "hot", 4.50, 4.51, "L2"),
            ref("a", "hot", 5.00, 5.01, "L1", tok="10", ttl=2),
        ]
        self.assertOnly(recs, "revived")

    def test_statuses(self):
        recs = [
            acq("a", "hot", 0.0, 0.1, st=500),
            acq("a", "hot", 0.2, 0.3, st=503),               # no Retry-After
            acq("a", "hot", 0.4, 0.5, st=503, ra="1"),       # fine
            acq("a", "hot", 0.6, 0.7, st=302),
            rel("a", "hot", 0.8, 0.9, "Lx", st=200),         # release is 204
        ]
        s = self.assertOnly(recs, "status", n=5)
        self.assertEqual(s["stats"]["acquire_ambiguous"], 4)

    def test_hidden_lease_is_reported(self):
        recs = [
            acq("a", "hot", 0.00, 0.01, lid="L1", tok="10", ttl=30),
            insp("b", "hot", 1.00, 1.01, st=404),
        ]
        self.assertOnly(recs, "hidden")

    def test_key_mixup_is_reported(self):
        recs = [
            acq("a", "hot", 0.00, 0.01, key="ka", lid="L1", tok="10"),
            acq("a", "hot", 0.10, 0.11, key="kz", lid="L1", tok="10"),
        ]
        self.assertOnly(recs, "key_mixup")

    def test_crashed_holder_taken_over_in_time(self):
        recs = [
            acq("a", "crash/1", 0.00, 0.01, lid="L1", tok="10", ttl=3),
            acq("w", "crash/1", 0.10, 4.80, lid="L2", tok="11", wait=8),
            rel("w", "crash/1", 5.00, 5.01, "L2"),
        ]
        crash = [{"c": "a", "op": "crash", "lock": "crash/1", "lid": "L1",
                  "i": 0.05}]
        rc, s = self.judge(recs, crashes=crash)
        self.assertEqual(rc, 0, s)
        self.assertEqual(s["stats"]["takeovers_in_time"], 1)

    def test_crashed_holder_taken_over_late_is_reported(self):
        recs = [
            acq("a", "crash/1", 0.00, 0.01, lid="L1", tok="10", ttl=3),
            acq("w", "crash/1", 0.10, 6.50, lid="L2", tok="11", wait=8),
            rel("w", "crash/1", 7.00, 7.01, "L2"),
        ]
        crash = [{"c": "a", "op": "crash", "lock": "crash/1", "lid": "L1",
                  "i": 0.05}]
        self.assertOnly(recs, "takeover", crashes=crash)
        # An unanswered acquire of the lock may have held it: excused.
        rc, s = self.judge(recs + [acq("z", "crash/1", 2.0, 2.5, st=None)],
                           crashes=crash)
        self.assertEqual(rc, 0, s)
        self.assertEqual(s["stats"]["takeover_excused"], 1)

    # ---- group locks

    def test_two_on_a_limit_2_semaphore_pass(self):
        recs = [
            acq("a", "sem", 0.00, 0.01, lid="S1", tok="10", lim=2),
            acq("b", "sem", 1.00, 1.01, lid="S2", tok="11", lim=2),
            rel("a", "sem", 2.00, 2.01, "S1"),
            # a third once the first is released: still two at once
            acq("c", "sem", 2.10, 2.11, lid="S3", tok="12", lim=2),
            rel("b", "sem", 3.00, 3.01, "S2"),
            rel("c", "sem", 3.10, 3.11, "S3"),
        ]
        rc, s = self.judge(recs)
        self.assertEqual(rc, 0, s)
        self.assertEqual(s["group_grants"], 3)
        self.assertEqual(s["stats"]["peak_valid_limit_2"], 2)

    def test_three_on_a_limit_2_semaphore_are_reported(self):
        recs = [
            acq("a", "sem", 0.00, 0.01, lid="S1", tok="10", lim=2),
            acq("b", "sem", 1.00, 1.01, lid="S2", tok="11", lim=2),
            # while S1 (until 4 s) and S2 (until 5 s) are valid
            acq("c", "sem", 2.00, 2.01, lid="S3", tok="12", lim=2),
            rel("a", "sem", 3.00, 3.01, "S1"),
            rel("b", "sem", 3.10, 3.11, "S2"),
            rel("c", "sem", 3.20, 3.21, "S3"),
        ]
        self.assertOnly(recs, "overlap")

    def test_four_on_a_limit_3_semaphore_are_reported(self):
        recs = [acq(c, "sem3", 0.1 * k, 0.1 * k + 0.01, lid="S%d" % k,
                    tok=str(10 + k), lim=3) for k, c in enumerate("abcd")]
        self.assertOnly(recs, "overlap")
        rc, s = self.judge(recs[:3])
        self.assertEqual(rc, 0, s)

    def test_semaphore_leases_of_two_limits_are_reported(self):
        recs = [
            acq("a", "sem", 0.00, 0.01, lid="S1", tok="10", lim=2),
            acq("b", "sem", 1.00, 1.01, lid="S2", tok="11", lim=3),
        ]
        self.assertOnly(recs, "overlap")

    def test_many_shared_leases_pass(self):
        recs = [acq(c, "rw", 0.1 * k, 0.1 * k + 0.01, lid="R%d" % k,
                    tok=str(10 + k), mode="shared")
                for k, c in enumerate("abcdefgh")]
        recs += [rel(c, "rw", 2.0 + 0.1 * k, 2.01 + 0.1 * k, "R%d" % k)
                 for k, c in enumerate("abcdefgh")]
        # the writer once every reader released
        recs += [acq("w", "rw", 3.00, 3.01, lid="W1", tok="30",
                     mode="exclusive", wait=5),
                 rel("w", "rw", 3.50, 3.51, "W1")]
        rc, s = self.judge(recs)
        self.assertEqual(rc, 0, s)
        self.assertEqual(s["stats"]["peak_valid_shared"], 8)

    def test_exclusive_beside_a_shared_lease_is_reported(self):
        recs = [
            acq("a", "rw", 0.00, 0.01, lid="R1", tok="10", mode="shared"),
            acq("b", "rw", 1.00, 1.01, lid="R2", tok="11", mode="shared"),
            # R1 valid until 4 s, R2 until 5 s: the writer meets R2 only
            acq("w", "rw", 4.50, 4.51, lid="W1", tok="12",
                mode="exclusive"),
            rel("w", "rw", 6.00, 6.01, "W1"),
        ]
        self.assertOnly(recs, "overlap")

    def test_shared_beside_an_exclusive_lease_is_reported(self):
        recs = [
            acq("w", "rw", 0.00, 0.01, lid="W1", tok="10",
                mode="exclusive"),
            acq("a", "rw", 1.00, 1.01, lid="R1", tok="11", mode="shared"),
            acq("b", "rw", 1.10, 1.11, lid="R2", tok="12", mode="shared"),
        ]
        # both readers are beside the writer; not beside each other
        self.assertOnly(recs, "overlap", n=2)

    def test_group_token_order_is_not_judged(self):
        # S2 inserted its object first but listed (was granted) last.
        recs = [
            acq("a", "sem", 0.00, 0.01, lid="S1", tok="11", lim=2),
            rel("a", "sem", 0.50, 0.51, "S1"),
            acq("b", "sem", 1.00, 1.01, lid="S2", tok="10", lim=2),
            rel("b", "sem", 1.50, 1.51, "S2"),
        ]
        rc, s = self.judge(recs, store="file")
        self.assertEqual(rc, 0, s)
        # the same on a plain lock is a violation
        plain = [dict(r) for r in recs]
        for r in plain:
            for k in ("lim", "amode", "alim"):
                r.pop(k, None)
        self.assertOnly(plain, "token_order", store="file")

    def test_a_semaphore_lease_refreshed_beside_another_is_no_revival(self):
        recs = [
            acq("a", "sem", 0.00, 0.01, lid="S1", tok="10", lim=2, ttl=3),
            acq("b", "sem", 1.00, 1.01, lid="S2", tok="11", lim=2),
            ref("a", "sem", 1.50, 1.51, "S1", tok="10", ttl=3),
            rel("a", "sem", 2.00, 2.01, "S1"),
            rel("b", "sem", 2.10, 2.11, "S2"),
        ]
        rc, s = self.judge(recs)
        self.assertEqual(rc, 0, s)
        # a writer granted in between: the reader's refresh revived it
        recs = [
            acq("a", "rw", 0.00, 0.01, lid="R1", tok="10", mode="shared",
                ttl=2),
            acq("w", "rw", 2.50, 2.51, lid="W1", tok="11", mode="exclusive",
                ttl=2),
            rel("w", "rw", 2.60, 2.61, "W1"),
            ref("a", "rw", 3.00, 3.01, "R1", tok="10", ttl=2),
        ]
        self.assertOnly(recs, "revived")

    def test_a_pending_group_lease_shown_is_no_phantom(self):
        # c's acquire was under way (its lease inserted, not yet listed)
        # when b's 409 showed its token; c was then refused.
        recs = [
            acq("a", "sem", 0.00, 0.01, lid="S1", tok="10", lim=2),
            acq("c", "sem", 0.50, 0.70, st=409, htok="10", ra="1", lim=2),
            acq("b", "sem", 0.55, 0.60, st=409, htok="10", ra="1", lim=2),
            rel("a", "sem", 1.00, 1.01, "S1"),
        ]
        recs[2]["htoks"] = ["10", "12"]
        rc, s = self.judge(recs)
        self.assertEqual(rc, 0, s)
        self.assertEqual(s["stats"]["holders_explained_by_pending"], 1)
        # nothing under way: a phantom (b's own acquire explains nothing)
        self.assertOnly([recs[0], recs[2], recs[3]], "phantom")

    def test_a_lease_replaced_by_its_own_key_is_given_up(self):
        # c's key asks again while its lease S1 is told valid (until 4 s):
        # the server judged S1 again, removed it and granted S2.
        recs = [
            acq("c", "sem", 0.00, 0.01, key="kc", lid="S1", tok="10", lim=2),
            acq("a", "sem", 1.00, 1.01, lid="S2", tok="11", lim=2),
            acq("c", "sem", 2.00, 2.05, key="kc", lid="S3", tok="12", lim=2),
            acq("b", "sem", 2.10, 2.11, lid="S4", tok="13", lim=2),
            rel("c", "sem", 2.50, 2.51, "S3"),
        ]
        # S4 beside S2 and S3 would be three, with S1 four
        rc, s = self.judge(recs[:3] + recs[4:])
        self.assertEqual(rc, 0, s)
        self.assertEqual(s["stats"]["leases_given_up_to_their_key"], 1)
        self.assertOnly(recs, "overlap")
        # S1 shown held after its key was granted S3: not given up at all
        seen = acq("d", "sem", 2.20, 2.21, st=409, htok="10", ra="1", lim=2)
        self.assertOnly(recs[:3] + [seen], "lost_release")
        # the same lease renewed by its key is still the one valid lease
        renewed = acq("c", "sem", 2.00, 2.05, key="kc", lid="S1", tok="10",
                      lim=2)
        self.assertOnly([recs[0], recs[1], renewed, recs[3]], "overlap")

    def test_kind_mismatches_are_reported(self):
        recs = [
            # granted a lease that shows another limit than asked
            acq("a", "sem", 0.00, 0.01, lid="S1", tok="10", lim=2,
                shown=("exclusive", 3)),
            rel("a", "sem", 0.50, 0.51, "S1"),
            # limit_mismatch though nobody asked another limit
            acq("b", "sem", 1.00, 1.01, st=409, htok="11", ra="1", lim=2),
            acq("c", "sem", 0.90, 1.50, lid="S2", tok="11", lim=2),
            rel("c", "sem", 2.00, 2.01, "S2"),
        ]
        recs[2]["code"] = "limit_mismatch"
        self.assertOnly(recs, "mismatch", n=2)

    def test_limit_mismatch_beside_another_kind_is_fine(self):
        recs = [
            acq("a", "sem", 0.00, 0.01, lid="S1", tok="10", lim=3),
            acq("b", "sem", 1.00, 1.01, st=409, htok="10", ra="1", lim=2),
            rel("a", "sem", 2.00, 2.01, "S1"),
            # a reader's own key holds a writer's lease: limit_mismatch
            acq("w", "rw", 3.00, 3.01, key="kw", lid="W1", tok="20",
                mode="exclusive"),
            acq("w", "rw", 3.50, 3.51, key="kw", st=409, htok="20", ra="1",
                mode="shared"),
            rel("w", "rw", 4.00, 4.01, "W1"),
        ]
        recs[1]["code"] = recs[4]["code"] = "limit_mismatch"
        rc, s = self.judge(recs)
        self.assertEqual(rc, 0, s)
        # another client's writer: a reader is told "locked", not this
        recs[4]["c"] = "x"
        self.assertOnly(recs, "mismatch")

    def test_missing_history_file_is_an_error(self):
        self.assertEqual(check_history.main(["/nonexistent/history"]), 2)


if __name__ == "__main__":
    unittest.main()
