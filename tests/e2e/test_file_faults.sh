#!/bin/sh
# The local store failing under a running server: its log is taken away
# (a directory put in its place: as root, which the tests may be, no mode
# bits would stop a write).  A write is answered 503 storage_unavailable
# with Retry-After and a message that says which step failed, never the
# host's data directory or the system's error text; the server's log line
# of that request has both, for the operator.  Once the log is back, the
# next write goes through.  Always runs on file://.
LG_STORE=file
. tests/e2e/lib.sh
lg_start
A="Authorization: Bearer $(lg_token alice)"
out=$LG_TMP/out
hdr=$LG_TMP/hdr
data=$LG_TMP/data

code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$A" "$LG_URL/v1/locks/before:acquire")
lg_eq "$code" 200 "a write before the fault"

mv "$data/.wal" "$data/wal.moved" && mkdir "$data/.wal" || lg_fail "cannot move the log away"
code=$(lg_curl -o "$out" -D "$hdr" -w '%{http_code}' -X POST -H "$A" "$LG_URL/v1/locks/during:acquire")
lg_eq "$code" 503 "a write without its log"
lg_eq "$(lg_json error.code <"$out")" storage_unavailable "the answer's code"
grep -qi '^Retry-After: [0-9]' "$hdr" || lg_fail "503 without Retry-After"
msg=$(lg_json error.message <"$out")
for leak in "$LG_TMP" "$data" "Is a directory"; do
	case $msg in
	*"$leak"*) lg_fail "the answer shows '$leak': $msg" ;;
	esac
done
case $msg in
*"could not open its log"*) ;;
*) lg_fail "the answer does not say which step failed: $msg" ;;
esac
# The request's log line: the operator's detail, where and why.
lg_wait_line "$LG_LOG" '"status":503' 5 || lg_fail "no log line of the 503"
line=$(grep '"status":503' "$LG_LOG" | head -n 1)
case $line in
*"could not open its log: Is a directory ($data/.wal)"*) ;;
*) lg_fail "the log line lacks the detail: $line" ;;
esac

rmdir "$data/.wal" && mv "$data/wal.moved" "$data/.wal" || lg_fail "cannot put the log back"
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$A" "$LG_URL/v1/locks/after:acquire")
lg_eq "$code" 200 "a write once the log is back"
lg_stop
echo ok
