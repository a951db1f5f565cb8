#!/usr/bin/env python3
"""compare.py BUCKET NAME=HOST:PORT NAME=HOST:PORT: the same Cloud Storage
JSON API requests, the ones lockgate sends (a multipart insert with
ifGenerationMatch=0, get with "fields", patch and delete with
preconditions, list by prefix in pages), sent to each storage in turn; what
lockgate reads of each answer is printed side by side (the status, then
the fields it uses), and the exit status is 1 when the two differ.

Values that are each storage's own (a generation, a time, a page token)
are compared by shape: a generation by its number of digits, a time by
being there, a token by being there."""
import http.client
import json
import random
import sys
from urllib.parse import quote

TIMEOUT_S = 10


def call(hostport, method, path, body=None, headers=None):
    host, port = hostport.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=TIMEOUT_S)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.getheader("Content-Type") or "", resp.read()
    finally:
        conn.close()


def seen(status, ctype, raw):
    """What lockgate reads of an answer, with each storage's own values
    reduced to their shape."""
    if not raw:
        return {"status": status, "body": "empty"}
    if "json" not in ctype:
        return {"status": status, "text": raw.decode("utf-8", "replace").strip()}
    try:
        j = json.loads(raw)
    except ValueError:
        return {"status": status, "body": "not JSON"}
    if not isinstance(j, dict):
        return {"status": status, "json": j}
    if "error" in j:
        e = j["error"]
        errs = e.get("errors") if isinstance(e, dict) else None
        return {"status": status, "error.code": e.get("code"),
                "error.reason": errs[0].get("reason") if errs else None}
    out = {"status": status}
    if j.get("kind") == "storage#objects" or "items" in j:
        out["items"] = len(j.get("items", []))
        out["nextPageToken"] = "nextPageToken" in j
        return out
    out["kind"] = j.get("kind")
    if "generation" in j:
        out["generation digits"] = len(str(j["generation"]))
    for k in ("metageneration", "metadata", "cacheControl"):
        out[k] = j.get(k)
    out["updated"] = "updated" in j
    return out


def insert(hp, bucket, name, md):
    meta = json.dumps({"name": name, "cacheControl": "no-store", "metadata": md})
    body = ("--b0undary\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n"
            + meta + "\r\n--b0undary\r\nContent-Type: application/octet-stream"
            "\r\n\r\n\r\n--b0undary--\r\n").encode()
    return call(hp, "POST", "/upload/storage/v1/b/%s/o?uploadType=multipart"
                "&ifGenerationMatch=0" % bucket, body,
                {"Content-Type": "multipart/related; boundary=b0undary"})


def steps(hp, bucket, prefix):
    """Yield (what, answer) for every request, in order."""
    o = "/storage/v1/b/%s/o/" % bucket
    a, b, c = (prefix + n for n in ("a", "b", "c"))
    ea = quote(a, safe="")
    yield "insert a", insert(hp, bucket, a, {"lease_id": "L1", "ttl": "30"})
    ans = insert(hp, bucket, a, {"lease_id": "L2", "ttl": "30"})
    yield "insert a again, ifGenerationMatch=0", ans
    gen = json.loads(ans[2]).get("generation", "0") if ans[0] == 200 else "0"
    yield "get a, fields=generation,metageneration,metadata", call(
        hp, "GET", o + ea + "?fields=generation,metageneration,metadata")
    yield "patch a, wrong metageneration", call(
        hp, "PATCH", o + ea + "?ifGenerationMatch=%s&ifMetagenerationMatch=9" % gen,
        json.dumps({"metadata": {"ttl": "60"}}), {"Content-Type": "application/json"})
    yield "patch a, right preconditions", call(
        hp, "PATCH", o + ea + "?ifGenerationMatch=%s&ifMetagenerationMatch=1" % gen,
        json.dumps({"metadata": {"ttl": "60"}}), {"Content-Type": "application/json"})
    yield "delete a, wrong generation", call(
        hp, "DELETE", o + ea + "?ifGenerationMatch=1&ifMetagenerationMatch=1")
    yield "get a", call(hp, "GET", o + ea)
    yield "delete a", call(hp, "DELETE", o + ea)
    yield "insert b", insert(hp, bucket, b, {"lease_id": "L3"})
    yield "insert c", insert(hp, bucket, c, {"lease_id": "L4"})
    lst = "/storage/v1/b/%s/o?prefix=%s&maxResults=1" % (bucket, quote(prefix, safe=""))
    ans = call(hp, "GET", lst)
    yield "list, maxResults=1", ans
    tok = json.loads(ans[2]).get("nextPageToken") if ans[0] == 200 else None
    if tok:
        yield "list, the next page", call(hp, "GET", lst + "&pageToken=" + quote(tok, safe=""))
    for n in (b, c):
        yield "delete " + n[len(prefix):], call(hp, "DELETE", o + quote(n, safe=""))


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: compare.py BUCKET NAME=HOST:PORT NAME=HOST:PORT")
    bucket = sys.argv[1]
    (n1, hp1), (n2, hp2) = (a.split("=", 1) for a in sys.argv[2:])
    prefix = "interop-%08x/" % random.getrandbits(32)
    r1 = list(steps(hp1, bucket, prefix))
    r2 = list(steps(hp2, bucket, prefix))
    diffs = 0
    for i in range(max(len(r1), len(r2))):
        w1, a1 = r1[i] if i < len(r1) else ("(none)", None)
        w2, a2 = r2[i] if i < len(r2) else ("(none)", None)
        s1 = seen(*a1) if a1 else None
        s2 = seen(*a2) if a2 else None
        same = w1 == w2 and s1 == s2
        diffs += not same
        print("%s %s" % ("  " if same else "!=", w1 if w1 == w2 else w1 + " / " + w2))
        print("     %-8s %s" % (n1, json.dumps(s1, sort_keys=True)))
        if not same:
            print("     %-8s %s" % (n2, json.dumps(s2, sort_keys=True)))
    print("%d of %d requests answered differently" % (diffs, max(len(r1), len(r2))))
    sys.exit(1 if diffs else 0)


if __name__ == "__main__":
    main()
