#!/usr/bin/env python3
"""check_history.py: judge a recorded lockgate history (python3 stdlib only).

    check_history.py [--store gs|file|mem] [--margin S] [--takeover-slack S]
                     [--json] [--summary FILE] HISTORY.jsonl...

A history is JSON lines, one per request a client made (or one event),
all times in seconds on one monotonic clock of the machine:

    {"c": client, "op": "acquire"|"refresh"|"release"|"inspect",
     "lock": name, "i": invoke time, "e": completion time,
     "st": HTTP status, or null when no answer came (timeout, reset,
     refused connection: an ambiguous outcome), "err": why there was none,
     "key": the idempotency key an acquire sent,
     "mode": the mode an acquire sent ("shared"|"exclusive"; absent:
     exclusive), "lim": the limit it sent (absent: 1),
     "amode", "alim": the mode and limit a 200 to such an acquire shows,
     "lid": the lease_id of the answer (acquire) or sent (refresh, release),
     "tok": fencing token of the answer (a lease, or an inspected lock),
     "htok": fencing token of the holder a 409 "locked" answer shows,
     "htoks", "toks": every holder's token a 409 or an inspect shows,
     when a group's holders tell more than its top-level token,
     "rttl": the ttl an acquire asked for, "wait": the wait it asked for,
     "ttl": ttl of the answer, "xin": expires_in, "xat": expires_at,
     "ri": refresh_interval, "ra": Retry-After header, "code": error code}
    {"c": client, "op": "crash", "lock": name, "lid": lease, "i": t}
        the holder of lid stopped refreshing at t (a crashed job) and a
        waiter asks for the lock from then on
    {"meta": {"store": "gs"|"file"|"mem", ...}}   optional, once

Definitions (README: "How the lock works", "Fencing tokens", lease_id,
"Semaphores and shared locks"):
- A lease's *kind* is the mode and limit of the acquire that granted it:
  exclusive (limit 1, the default), a semaphore's (limit N > 1), or
  shared.  A lock whose acquires all asked exclusive is a *plain* lock;
  one that any acquire asked with a limit or mode=shared is a *group*
  lock (its exclusive leases are leases over the group).
- A lease is one grant, named by the lease_id the server made.  It is
  *told* valid by each 200 answer k (acquire or refresh) for
  min(ttl, expires_in) seconds counted from the request's invoke i_k,
  less MARGIN (1 s): segment [e_k, i_k + life_k - MARGIN], e_k being the
  answer's completion (the client knows nothing before).  A lease is valid
  on the union of its segments, cut at the invoke of its first release
  request, or of the first later acquire with its key (by its client, on
  its lock) that was not answered with that very lease: the holder asking
  again gives it up (README lease_id: a group's keyed re-acquire judges
  the lease its key finds, and one that does not pass is removed and a
  new lease acquired); one answered with another lease counts as that
  lease's acknowledged release.  Counting from the invoke is sound: the
  storage wrote the lease at or after i_k, and the server keeps it a
  further 1 s margin.
- Outcomes: an acquire answered 200 granted; 409 or 429 did not.  Any
  other answer (503, no answer at all) is *ambiguous*: the storage may
  hold a lease for that key that nobody was told of.  Such a grant is
  never counted for exclusion (nobody relied on it) until an answer
  reveals it (a later acquire with the same key returns it: it is then
  counted from that answer on).  An unrevealed ambiguous acquire makes
  its lock *possibly held* from its invoke until its completion (or its
  invoke + wait, whichever is later) + SERVER_GRACE_S (15 s: the server
  may still finish it after the client left) + the ttl it asked for +
  the margin: within that window it may explain a holder nobody else
  knows and a waiter's late grant, so neither is reported against it.
  Likewise a refresh or release without a definite answer changes
  nothing the checker relies on; a retried release may find the lease
  gone (404/409), which is no loss.
- Grant interval of a lease: [lower, first completion], lower being the
  invoke of the first attempt with its key since that key's previous
  grant (the earliest moment the storage can have written it).

Checks (each violation is printed with the records behind it):
  overlap          at one moment the valid leases of a lock are more than
                   their kinds allow: an exclusive lease beside any other,
                   more than N of a semaphore with limit N, or leases of
                   two kinds (shared beside a semaphore's, or limits that
                   differ); any number of shared leases alone is fine
  token_reused     two leases of one lock with one fencing token, or one
                   lease whose token changed
  token_order      on a plain lock, a lease granted wholly after another
                   (first completion before the other's lower bound) has a
                   smaller token; a violation on file:// and mem://,
                   reported on gs://.  Not judged on group locks: a group
                   lease's token is its object's generation at insert,
                   and it is granted only at a later listing, so grant
                   order need not follow token order there (a lease that
                   inserted first may list last); tokens stay distinct
                   (token_reused) on every lock
  lost_release     after a release was acknowledged (204), an answer
                   whose request began later shows that lease held (a
                   409's holder, an inspect, a refresh or re-acquire 200)
  revived          a refresh succeeded although another lease of the lock
                   that could not be valid beside it (either exclusive, or
                   of another kind) was granted wholly between the lease's
                   previous answer and that refresh
  lost_early       a refresh or first release answered 404/409 (lease
                   gone) and completed before the lease's told expiry
  hidden           an inspect answered 404 not_held while a known lease
                   was valid over the whole request
  key_mixup        an acquire returned a lease granted to another key
  phantom          an answer shows a holder (token) that no known lease
                   has and no ambiguous acquire of that lock can explain;
                   on a group lock, nor any acquire of it under way during
                   the answer (a pending lease, listed by others before
                   its own listing refused it and it was deleted), nor a
                   refused writer's lease over the group for its ttl after
                   the refusal (README: one "refused and never patched
                   back", when the store failed that patch)
  mismatch         a 200 showing another mode or limit than its acquire
                   asked; a re-acquire returning a lease of another kind;
                   a 409 limit_mismatch that no acquire of the lock with
                   another kind explains (a reader meeting a writer, or a
                   writer readers, is "locked", unless the writer's own
                   key holds the reader's lease)
  status           an answer outside the API's statuses for that call, a
                   refusal (400/401/403) of the soak's valid requests, a
                   5xx other than 503, a 503 or 429 without Retry-After
  takeover         after a crash event, no waiter was granted the lock
                   within TTL + SLACK (2 s) of the lease's last answer,
                   although a waiter was asking throughout and nothing
                   ambiguous happened to the lock meanwhile
Also reported: leases by disposition (released, lost, expired, held at
the end), ambiguous outcomes, takeover latencies, token-order inversions.
Exit 0 when no violation, 1 otherwise, 2 on unreadable input.
"""
import argparse
import bisect
import collections
import json
import sys

MARGIN_S = 1.0          # README: the documented margin on a told expiry
TAKEOVER_SLACK_S = 2.0  # issue 24: a waiter gets a crashed job's lock by TTL + 2 s
SERVER_GRACE_S = 15.0   # a server may work on a request this long after its client left
EXAMPLES_MAX = 5        # violations printed per check

# The statuses the API documents for each call (README "The API").
API_STATUSES = {
    "acquire": {200, 400, 401, 403, 409, 413, 429, 503},
    "refresh": {200, 400, 401, 403, 404, 409, 413, 503},
    "release": {204, 400, 401, 403, 404, 409, 413, 503},
    "inspect": {200, 400, 401, 403, 404, 503},
}
# Refusals the soak's requests (valid input, valid tokens) never deserve.
REFUSALS = {400, 401, 403, 413}
CHECKS = ("overlap", "token_reused", "token_order", "lost_release", "revived",
          "lost_early", "hidden", "key_mixup", "phantom", "status", "takeover",
          "mismatch")
EXCLUSIVE = ("exclusive", 1)


class Lease:
    __slots__ = ("lid", "lock", "client", "key", "token", "answers", "lower",
                 "first_e", "rel_invoke", "rel_ack", "gone_at", "ttl", "kind")

    def __init__(self, lid, lock, client, key, token, lower, kind=EXCLUSIVE):
        self.lid, self.lock, self.client, self.key = lid, lock, client, key
        self.token, self.lower, self.kind = token, lower, kind
        self.answers = []       # (invoke, completion, told expiry, record)
        self.first_e = None
        self.rel_invoke = None  # first release request sent
        self.rel_ack = None     # completion of the first 204
        self.gone_at = None     # completion of a 404/409 to refresh/release
        self.ttl = None

    def told_expiry_before(self, t):
        """The latest expiry told by answers completed before t."""
        best = None
        for (_, e, x, _) in self.answers:
            if e < t and (best is None or x > best):
                best = x
        return best


def tok_int(t):
    try:
        return int(t)
    except (TypeError, ValueError):
        return None


def kind_of(r):
    """The kind an acquire asked for: (mode, limit), limit None if shared."""
    if r.get("mode") == "shared":
        return ("shared", None)
    lim = r.get("lim")
    return ("exclusive", 1 if lim is None else int(lim))


def kind_name(k):
    return ("exclusive" if k == EXCLUSIVE else "shared" if k[0] == "shared"
            else "limit %d" % k[1])


def answered_kind(r):
    """The kind a 200 to a group acquire showed (None: not recorded)."""
    if "amode" not in r:
        return None
    if r["amode"] == "shared":
        return ("shared", None)
    return (r["amode"], r.get("alim"))


def fits(kinds):
    """Whether leases of KINDS may all be valid at one moment."""
    if len(kinds) < 2:
        return True
    first = kinds[0]
    if first == EXCLUSIVE or any(k != first for k in kinds):
        return False
    return first[0] == "shared" or len(kinds) <= first[1]


def conflict(a, b):
    """Whether a lease of kind A is ever valid beside one of kind B."""
    return a == EXCLUSIVE or a != b


def life_of(r):
    """Seconds a 200 answer told its lease lives, from the request's invoke."""
    ttl = r.get("ttl")
    xin = r.get("xin")
    if ttl is None:
        return xin
    return ttl if xin is None else min(ttl, xin)


def brief(r):
    keep = ("c", "op", "lock", "inst", "i", "e", "st", "err", "key", "lid",
            "tok", "htok", "ttl", "xin", "code", "mode", "lim", "amode",
            "alim")
    return {k: r[k] for k in keep if k in r and r[k] is not None}


class Checker:
    def __init__(self, store, margin, slack):
        self.store, self.margin, self.slack = store, margin, slack
        self.v = collections.defaultdict(list)   # check -> [message]
        self.vcount = collections.Counter()
        self.leases = {}                          # lid -> Lease
        self.by_lock = collections.defaultdict(list)
        self.ambiguous = collections.defaultdict(list)  # lock -> [record]
        self.stats = collections.Counter()
        self.notes = []
        self.group_locks = set()   # locks any acquire asked as a group

    def violate(self, check, msg, *recs):
        self.vcount[check] += 1
        if len(self.v[check]) < EXAMPLES_MAX:
            self.v[check].append(
                msg + "".join("\n      " + json.dumps(brief(r)) for r in recs))

    # ---- pass 1: statuses, and the leases the answers tell of

    def check_status(self, r):
        st, op = r.get("st"), r["op"]
        if st is None:
            return
        allowed = API_STATUSES.get(op)
        if allowed is not None and st not in allowed:
            self.violate("status", "%s answered %d, not a status the API "
                         "documents for it" % (op, st), r)
        elif st in REFUSALS:
            self.violate("status", "%s refused a valid request with %d (%s)"
                         % (op, st, r.get("code")), r)
        if st >= 500 and st != 503:
            self.violate("status", "a 5xx other than 503", r)
        if st in (503, 429) and not str(r.get("ra") or "").isdigit():
            self.violate("status", "a %d without a Retry-After in seconds"
                         % st, r)

    def grant(self, r, lower):
        lid, lock, tok = r.get("lid"), r["lock"], r.get("tok")
        if not lid or tok is None:
            self.violate("status", "a 200 to acquire without lease_id or "
                         "fencing_token", r)
            return None
        kind = kind_of(r)
        shown = answered_kind(r)
        if shown is not None and shown != kind:
            self.violate("mismatch", "acquire asked %s and was granted a "
                         "lease that shows %s" % (kind_name(kind),
                                                  kind_name(shown)), r)
        L = self.leases.get(lid)
        if L is None:
            L = Lease(lid, lock, r["c"], r.get("key"), tok, lower, kind)
            self.leases[lid] = L
            self.by_lock[lock].append(L)
            self.stats["grants"] += 1
        else:
            self.stats["renewing_reacquires"] += 1
            if L.kind != kind:
                self.violate("mismatch", "a re-acquire asking %s returned "
                             "lease %s granted %s" % (
                                 kind_name(kind), lid, kind_name(L.kind)), r)
            if L.lock != lock or L.client != r["c"] or L.key != r.get("key"):
                self.violate("key_mixup", "acquire with key %s returned lease "
                             "%s granted to key %s of %s" % (
                                 r.get("key"), lid, L.key, L.client), r)
            if L.rel_ack is not None and L.rel_ack < r["i"]:
                self.violate("lost_release", "a re-acquire returned lease %s "
                             "after its release was acknowledged" % lid, r)
        self.answer(L, r)
        return L

    def answer(self, L, r):
        if r.get("tok") is not None and r["tok"] != L.token:
            self.violate("token_reused", "lease %s changed fencing token "
                         "%s -> %s" % (L.lid, L.token, r["tok"]), r)
        life = life_of(r)
        if life is None:
            self.violate("status", "a lease answer without ttl or "
                         "expires_in", r)
            return
        L.ttl = r.get("ttl", L.ttl)
        L.answers.append((r["i"], r["e"], r["i"] + life - self.margin, r))
        if L.first_e is None or r["e"] < L.first_e:
            L.first_e = r["e"]

    def amb_window(self, r):
        """When the lease an ambiguous acquire R may have left can exist:
        from its invoke until the server may still grant it (its wait, and
        the storage retry budget, past the client's giving up), plus the
        ttl it asked for and the server's margin."""
        end = max(r.get("e") or r["i"], r["i"] + (r.get("wait") or 0))
        return (r["i"], end + SERVER_GRACE_S + (r.get("rttl") or 300) +
                self.margin + 1)

    def acquires(self, recs):
        """Acquires per (client, key), in invoke order."""
        seq = collections.defaultdict(list)
        for r in recs:
            seq[(r["c"], r.get("key"))].append(r)
            if kind_of(r) != EXCLUSIVE:
                self.group_locks.add(r["lock"])
        for rs in seq.values():
            rs.sort(key=lambda r: r["i"])
            since = None   # first attempt since the key's last grant
            held = {}      # lock -> the lease the key was last granted
            for r in rs:
                st = r.get("st")
                if since is None:
                    since = r["i"]
                L = held.pop(r["lock"], None)
                if L is not None and (st != 200 or r.get("lid") != L.lid):
                    self.given_up(L, r)
                if st == 200:
                    L = self.grant(r, since)
                    if L is not None:
                        held[r["lock"]] = L
                    since = None
                elif st in (409, 429):
                    self.stats["acquire_refused_%d" % st] += 1
                    if st == 409 and r.get("htok") is not None:
                        self.observe(r["lock"], r["htok"], r.get("htoks"), r)
                    if r.get("code") == "limit_mismatch":
                        self.stats["acquire_limit_mismatch"] += 1
                        self.mismatch(r)
                else:
                    # Possibly granted; remember it for the lock.
                    self.stats["acquire_ambiguous"] += 1
                    self.ambiguous[r["lock"]].append(r)

    def given_up(self, L, r):
        """L's key asked again (R) and was not answered with L."""
        self.stats["leases_given_up_to_their_key"] += 1
        if L.rel_invoke is None or r["i"] < L.rel_invoke:
            L.rel_invoke = r["i"]
        if r.get("st") == 200 and (L.rel_ack is None or r["e"] < L.rel_ack):
            L.rel_ack = r["e"]   # another lease for the key: L is gone

    def observe(self, lock, tok, toks, r):
        for t in [tok] + [t for t in toks or () if t != tok]:
            if t is not None:
                self.obs.append((lock, t, r))

    def mismatch(self, r):
        """A limit_mismatch needs a live lease of another kind: one that
        an acquire of the lock asked for before R was answered (of the
        other side of a shared lock only by R's own key)."""
        k = kind_of(r)
        for q in self.acq_by_lock.get(r["lock"], ()):
            kq = kind_of(q)
            if q["i"] >= r["e"] or kq == k:
                continue
            if {k, kq} == {("shared", None), EXCLUSIVE} and \
                    (q["c"], q.get("key")) != (r["c"], r.get("key")):
                continue   # reader and writer: "locked", not a mismatch
            return
        self.violate("mismatch", "%s: limit_mismatch to an acquire asking "
                     "%s, though no acquire of the lock asked another kind"
                     % (r["lock"], kind_name(k)), r)

    def run(self, recs, crashes):
        self.obs = []   # (lock, token, record): an answer shows it held
        for r in recs:
            self.check_status(r)
            self.stats["requests"] += 1
            if r.get("st") is None:
                self.stats["no_answer"] += 1
        self.acquires([r for r in recs if r["op"] == "acquire"])
        others = sorted((r for r in recs if r["op"] != "acquire"),
                        key=lambda r: r["i"])
        # Releases first: a later record's judgement needs them.
        for r in others:
            if r["op"] == "release":
                self.release(r)
        for L in self.by_lock.values():
            L.sort(key=lambda L: L.lower)
        self.lowers = {k: [L.lower for L in v] for k, v in self.by_lock.items()}
        for r in others:
            if r["op"] == "refresh":
                self.refresh(r)
            elif r["op"] == "inspect":
                self.inspect(r)
        for L in self.leases.values():
            for (_, _, _, r) in L.answers:
                if r["op"] == "refresh" and L.rel_ack is not None \
                        and L.rel_ack < r["i"]:
                    self.violate("lost_release", "lease %s refreshed after "
                                 "its release was acknowledged" % L.lid, r)
        self.early_loss(recs)
        self.observations()
        self.exclusion()
        self.token_order()
        for c in crashes:
            self.takeover(c)
        self.dispositions(recs)

    def release(self, r):
        L = self.leases.get(r.get("lid"))
        if L is None:
            return
        if L.rel_invoke is None or r["i"] < L.rel_invoke:
            L.rel_invoke = r["i"]
        st = r.get("st")
        if st == 204:
            self.stats["releases_acknowledged"] += 1
            if L.rel_ack is None or r["e"] < L.rel_ack:
                L.rel_ack = r["e"]
        elif st in (404, 409):
            if L.gone_at is None or r["e"] < L.gone_at:
                L.gone_at = r["e"]
        elif st is None or st == 503:
            self.stats["release_ambiguous"] += 1

    def refresh(self, r):
        L = self.leases.get(r.get("lid"))
        st = r.get("st")
        if L is None:
            if st == 200:
                self.violate("phantom", "a refresh of a lease nobody was "
                             "granted succeeded", r)
            return
        if st == 200:
            prev = [e for (_, e, _, _) in L.answers if e < r["i"]]
            since = max(prev) if prev else L.lower
            self.revived(L, since, r)
            self.answer(L, r)
            self.stats["refreshes"] += 1
        elif st in (404, 409):
            self.stats["refresh_lost"] += 1
            if L.gone_at is None or r["e"] < L.gone_at:
                L.gone_at = r["e"]
        else:
            self.stats["refresh_ambiguous"] += 1

    def revived(self, L, since, r):
        """Another lease granted wholly within (since, r's invoke)."""
        lows = self.lowers[L.lock]
        k = bisect.bisect_right(lows, since)
        for M in self.by_lock[L.lock][k:]:
            if M.lower >= r["i"]:
                break
            if M is not L and M.first_e is not None and \
                    M.first_e < r["i"] and conflict(L.kind, M.kind):
                self.violate("revived", "lease %s (token %s) was refreshed "
                             "after lease %s (token %s) had been granted in "
                             "between" % (L.lid, L.token, M.lid, M.token),
                             M.answers[0][3], r)
                return

    def inspect(self, r):
        st = r.get("st")
        if st == 200 and r.get("tok") is not None:
            self.observe(r["lock"], r["tok"], r.get("toks"), r)
        elif st == 404:
            for L in self.by_lock.get(r["lock"], ()):
                if L.first_e is None or L.first_e >= r["i"]:
                    continue
                if L.rel_invoke is not None and L.rel_invoke <= r["e"]:
                    continue
                x = L.told_expiry_before(r["i"])
                if x is not None and x > r["e"]:
                    self.violate("hidden", "inspect said not_held while "
                                 "lease %s (token %s) was valid" % (
                                     L.lid, L.token), L.answers[0][3], r)

    def early_loss(self, recs):
        """A lease answered gone before the expiry its holder was told."""
        first_rel = {}
        for r in recs:
            if r["op"] == "release" and r.get("lid") in self.leases:
                if r["lid"] not in first_rel or r["i"] < first_rel[r["lid"]]["i"]:
                    first_rel[r["lid"]] = r
        for r in recs:
            if r["op"] not in ("refresh", "release") or \
                    r.get("st") not in (404, 409):
                continue
            L = self.leases.get(r.get("lid"))
            if L is None:
                continue
            if r["op"] == "release" and first_rel[L.lid] is not r:
                continue   # a retried release: the first may have done it
            if r["op"] == "refresh" and L.rel_invoke is not None \
                    and L.rel_invoke < r["e"]:
                continue
            x = L.told_expiry_before(r["i"])
            if x is not None and r["e"] < x:
                self.violate("lost_early", "%s of lease %s answered %d "
                             "(%s) %.3f s before the expiry its holder was "
                             "told" % (r["op"], L.lid, r["st"], r.get("code"),
                                       x - r["e"]), L.answers[-1][3], r)

    def observations(self):
        tokens = collections.defaultdict(dict)   # lock -> token -> Lease
        for L in self.leases.values():
            other = tokens[L.lock].get(L.token)
            if other is not None and other is not L:
                self.violate("token_reused", "leases %s and %s of %s share "
                             "fencing token %s" % (other.lid, L.lid, L.lock,
                                                   L.token),
                             other.answers[0][3], L.answers[0][3])
            tokens[L.lock][L.token] = L
        for (lock, tok, r) in self.obs:
            L = tokens[lock].get(tok)
            if L is None:
                if any(lo < r["e"] and hi > r["i"] for lo, hi in
                       map(self.amb_window, self.ambiguous.get(lock, ()))):
                    self.stats["holders_explained_by_ambiguity"] += 1
                    continue
                if lock in self.group_locks and self.under_way(lock, r):
                    self.stats["holders_explained_by_pending"] += 1
                    continue
                self.violate("phantom", "%s shows holder token %s that no "
                             "grant and no ambiguous acquire explains"
                             % (lock, tok), r)
            elif L.rel_ack is not None and L.rel_ack < r["i"]:
                self.violate("lost_release", "lease %s (token %s) shown "
                             "held after its release was acknowledged" % (
                                 L.lid, tok), r)

    def under_way(self, lock, r):
        """Whether an acquire of LOCK other than R was under way during R
        (its pending lease may be what R saw), or was a writer refused
        less than its ttl before R (its lease over the group may not have
        been patched back)."""
        idx = self.pending_idx.get(lock)
        if idx is None:
            acqs = sorted(self.acq_by_lock.get(lock, ()),
                          key=lambda q: q["i"])
            # Prefix maxima of the end, the best two (R may be one).
            best, tops = [], []
            for q in acqs:
                end = q.get("e") or q["i"]
                if kind_of(q) == EXCLUSIVE and q.get("st") == 409:
                    end += (q.get("rttl") or 300) + self.margin + 1
                best = sorted(best + [(end, id(q))], reverse=True)[:2]
                tops.append(best)
            idx = ([q["i"] for q in acqs], tops)
            self.pending_idx[lock] = idx
        starts, tops = idx
        k = bisect.bisect_left(starts, r["e"])
        if k == 0:
            return False
        return any(e > r["i"] for (e, who) in tops[k - 1] if who != id(r))

    def exclusion(self):
        for lock, leases in self.by_lock.items():
            segs = []
            for L in leases:
                cut = L.rel_invoke
                mine = []
                for (_, e, x, r) in L.answers:
                    end = x if cut is None else min(x, cut)
                    if end > e:
                        mine.append([e, end, r])
                mine.sort(key=lambda s: s[0])
                merged = []
                for s in mine:
                    if merged and s[0] <= merged[-1][1]:
                        merged[-1][1] = max(merged[-1][1], s[1])
                    else:
                        merged.append(s)
                segs.extend((s[0], s[1], L, s[2]) for s in merged)
            segs.sort(key=lambda s: s[0])
            valid = []   # the segments valid at the current one's start
            for s in segs:
                self.stats["validity_segments"] += 1
                valid = [v for v in valid if v[1] > s[0] and v[2] is not s[2]]
                if valid and not fits([v[2].kind for v in valid] +
                                      [s[2].kind]):
                    self.violate("overlap", "%s: lease %s (token %s, %s) "
                                 "valid from %.3f beside %s" % (
                                     lock, s[2].lid, s[2].token,
                                     kind_name(s[2].kind), s[0],
                                     ", ".join(
                                         "lease %s (token %s, %s) valid "
                                         "until %.3f" % (
                                             v[2].lid, v[2].token,
                                             kind_name(v[2].kind), v[1])
                                         for v in valid)),
                                 *[v[3] for v in valid[:3]] + [s[3]])
                valid.append(s)
                peak = "peak_valid_" + kind_name(s[2].kind).replace(" ", "_")
                self.stats[peak] = max(self.stats[peak], len(valid))

    def token_order(self):
        inversions = 0
        example = None
        for lock, leases in self.by_lock.items():
            if lock in self.group_locks:
                continue   # grants decided at a later listing (docstring)
            done = sorted((L for L in leases if tok_int(L.token) is not None),
                          key=lambda L: L.first_e)
            best, j = None, 0
            for L in sorted(done, key=lambda L: L.lower):
                while j < len(done) and done[j].first_e < L.lower:
                    if best is None or tok_int(done[j].token) > \
                            tok_int(best.token):
                        best = done[j]
                    j += 1
                if best is not None and tok_int(best.token) >= \
                        tok_int(L.token):
                    inversions += 1
                    if example is None:
                        example = (best, L)
                    if self.store != "gs":
                        self.violate("token_order", "%s: lease %s granted "
                                     "after lease %s has token %s <= %s" % (
                                         lock, L.lid, best.lid, L.token,
                                         best.token), best.answers[0][3],
                                     L.answers[0][3])
        self.stats["token_order_inversions"] = inversions
        if self.store == "gs":
            self.notes.append("gs://: fencing tokens %s in grant order "
                              "(%d inversions; reported, not failed)" % (
                                  "increased" if not inversions
                                  else "did NOT always increase", inversions))

    def takeover(self, c):
        L = self.leases.get(c.get("lid"))
        lock = c["lock"]
        if L is None or not L.answers or L.ttl is None:
            self.stats["takeover_unjudged"] += 1
            return
        last = max(e for (_, e, _, _) in L.answers)
        due = last + L.ttl + self.slack
        after = [M for M in self.by_lock[lock]
                 if M is not L and M.first_e is not None and M.first_e > last]
        first = min(after, key=lambda M: M.first_e) if after else None
        if first is not None and first.first_e <= due:
            lat = first.first_e - (last + L.ttl)
            self.stats["takeovers_in_time"] += 1
            self.takeover_lat.append(lat)
            return
        # Excused: an ambiguous acquire that may hold the lock meanwhile,
        # or no waiter asking throughout (its request failed, or it was
        # sent too late to be judged).
        free = L.answers[-1][0] + L.ttl
        for r in self.ambiguous.get(lock, ()):
            lo, hi = self.amb_window(r)
            if lo < due and hi > free:
                self.stats["takeover_excused"] += 1
                return
        asking = [r for r in self.acq_by_lock.get(lock, ())
                  if r["i"] <= last + L.ttl and r["c"] != L.client
                  and (r.get("e") is None or r["e"] >= due)]
        if not asking:
            self.stats["takeover_excused"] += 1
            return
        self.violate("takeover", "%s: the holder of lease %s stopped "
                     "refreshing; no waiter was granted by TTL + %.0f s "
                     "(first grant after it: %s)" % (
                         lock, L.lid, self.slack,
                         "none" if first is None else
                         "%.3f s late" % (first.first_e - due)),
                     L.answers[-1][3], *asking[:1])

    def dispositions(self, recs):
        end = max((r.get("e") or r["i"]) for r in recs) if recs else 0
        d = collections.Counter()
        for L in self.leases.values():
            if L.lock in self.group_locks:
                self.stats["group_grants"] += 1
                self.stats["group_grants_" + (
                    "exclusive" if L.kind == EXCLUSIVE else "shared"
                    if L.kind[0] == "shared" else "limit_%d" % L.kind[1])] += 1
            if L.rel_ack is not None:
                d["released"] += 1
            elif L.gone_at is not None:
                d["lost"] += 1
            else:
                x = max(x for (_, _, x, _) in L.answers) if L.answers else 0
                d["expired" if x < end else "held_at_end"] += 1
        self.disp = d


def load(paths):
    recs, crashes, meta = [], [], {}
    for p in paths:
        with open(p, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    r = json.loads(line)
                except ValueError as ex:
                    raise SystemExit("%s:%d: not JSON: %s" % (p, n, ex))
                if "meta" in r:
                    meta.update(r["meta"])
                elif r.get("op") == "crash":
                    crashes.append(r)
                elif r.get("op") in API_STATUSES:
                    if not isinstance(r.get("i"), (int, float)) or \
                            (r.get("st") is not None and
                             not isinstance(r.get("e"), (int, float))):
                        raise SystemExit("%s:%d: no invoke/complete time"
                                         % (p, n))
                    recs.append(r)
    return recs, crashes, meta


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--store", choices=("gs", "file", "mem"))
    ap.add_argument("--margin", type=float, default=MARGIN_S)
    ap.add_argument("--takeover-slack", type=float, default=TAKEOVER_SLACK_S)
    ap.add_argument("--json", action="store_true",
                    help="print the summary as one JSON object")
    ap.add_argument("--summary", metavar="FILE",
                    help="also write the JSON summary to FILE")
    ap.add_argument("history", nargs="+")
    a = ap.parse_args(argv)
    try:
        recs, crashes, meta = load(a.history)
    except OSError as ex:
        print("check_history: %s" % ex, file=sys.stderr)
        return 2
    store = a.store or meta.get("store") or "gs"
    ck = Checker(store, a.margin, a.takeover_slack)
    ck.takeover_lat = []
    ck.pending_idx = {}
    ck.acq_by_lock = collections.defaultdict(list)
    for r in recs:
        if r["op"] == "acquire":
            ck.acq_by_lock[r["lock"]].append(r)
    ck.run(recs, crashes)
    lat = sorted(ck.takeover_lat)
    summary = {
        "store": store,
        "requests": ck.stats["requests"],
        "grants": ck.stats["grants"],
        "group_grants": ck.stats["group_grants"],
        "violations": sum(ck.vcount.values()),
        "by_check": {k: ck.vcount.get(k, 0) for k in CHECKS},
        "leases": dict(ck.disp),
        "stats": dict(ck.stats),
        "crashes": len(crashes),
        "takeover_latency_max_s": round(lat[-1], 3) if lat else None,
        "notes": ck.notes,
    }
    if a.summary:
        with open(a.summary, "w", encoding="utf-8") as f:
            json.dump(summary, f, sort_keys=True)
    if a.json:
        print(json.dumps(summary, sort_keys=True))
    else:
        print("history: %d requests, %d grants (%s), %d no answer, "
              "%d ambiguous acquires" % (
                  summary["requests"], summary["grants"],
                  ", ".join("%s %d" % kv for kv in sorted(ck.disp.items())),
                  ck.stats["no_answer"], ck.stats["acquire_ambiguous"]))
        if ck.group_locks:
            print("group locks: %d of %d grants (%s), most valid at once "
                  "(%s), %d limit_mismatch, %d holders shown of pending "
                  "leases" % (
                      summary["group_grants"], summary["grants"],
                      ", ".join("%s %d" % (k[13:], v) for k, v in
                                sorted(ck.stats.items())
                                if k.startswith("group_grants_")),
                      ", ".join("%s %d" % (k[11:], v) for k, v in
                                sorted(ck.stats.items())
                                if k.startswith("peak_valid_")),
                      ck.stats["acquire_limit_mismatch"],
                      ck.stats["holders_explained_by_pending"]))
        if crashes:
            print("crashed holders: %d, taken over in time %d, excused %d, "
                  "unjudged %d, worst takeover %s s after TTL" % (
                      len(crashes), ck.stats["takeovers_in_time"],
                      ck.stats["takeover_excused"],
                      ck.stats["takeover_unjudged"],
                      summary["takeover_latency_max_s"]))
        for n in ck.notes:
            print(n)
        for k in CHECKS:
            if ck.vcount.get(k):
                print("VIOLATION %s: %d" % (k, ck.vcount[k]))
                for m in ck.v[k]:
                    print("  - " + m)
        print("checker: %d violations" % summary["violations"])
    return 1 if summary["violations"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
