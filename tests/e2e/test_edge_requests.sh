#!/bin/sh
# Issue 20, items 1-4: every request is read one way.  A header name with
# whitespace before its colon, a raw NUL byte in the request line or a
# header, and a route spelled with percent-encoding are refused (400 and
# the connection closed, or no route), so no proxy in front can read the
# request otherwise; too many query arguments are refused at once.  So are
# a request line with a bare CR, a space or a tab in its target or a
# method that is no token, an HTTP/1.1 request with no Host or two, and an
# HTTP/1.0 one with a Transfer-Encoding (RFC 9112).  The
# bytes are sent raw by tests/e2e/edge_requests.py.
. tests/e2e/lib.sh
lg_start
A=$(lg_token alice)
B=$(lg_token bob)

# A lock the truncated forms would have answered for.
code=$(lg_curl -o /dev/null -w '%{http_code}' -X POST \
    -H "Authorization: Bearer $A" "$LG_URL/v1/locks/prod/a:acquire?ttl=60")
lg_eq "$code" 200 "acquire prod/a"

python3 tests/e2e/edge_requests.py "${LG_URL#http://}" "$A" "$B" ||
    lg_fail "edge requests"

# Nothing was taken through an encoded verb, and the server is healthy.
code=$(lg_curl -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $A" \
    "$LG_URL/v1/locks/prod/a%3Aacquire")
lg_eq "$code" 400 "inspect by an encoded name"
code=$(lg_curl -o "$LG_TMP/list" -w '%{http_code}' -H "Authorization: Bearer $A" \
    "$LG_URL/v1/locks?prefix=prod")
lg_eq "$code" 200 "list"
lg_eq "$(python3 -c 'import json,sys; print(" ".join(l["name"] for l in json.load(open(sys.argv[1]))["locks"]))' "$LG_TMP/list")" \
    "prod/a" "only prod/a is held under prod"
code=$(lg_curl -o /dev/null -w '%{http_code}' "$LG_URL/healthz")
lg_eq "$code" 200 "healthy"
lg_stop
echo ok
