#!/bin/sh
# Clock skew: expiry is judged on the storage's clock, so an instance whose
# own clock runs 60 s ahead never takes over an unexpired lock.  Two ways:
# the fake GCS's clock set 60 s behind every instance (always), and one
# instance under libfaketime at +60 s (when Debian's faketime is installed;
# it needs the non-ASan binary: ASan must come first in the preload order).
# Always runs on gs:// against the fake.
LG_STORE=gs
. tests/e2e/lib.sh
FAKETIME_LIB=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1
A="Authorization: Bearer $(lg_token alice)"
B="Authorization: Bearer $(lg_token bob)"
out=$LG_TMP/out

# 1. The storage's clock runs 60 s behind both instances.
lg_fake "config?clock_offset_ms=-60000" >/dev/null
lg_start
U1=$LG_URL
lg_start
U2=$LG_URL
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$A" "$U1/v1/locks/skew/a:acquire?ttl=4")
lg_eq "$code" 200 "acquire on instance 1"
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$B" "$U2/v1/locks/skew/a:acquire?ttl=10")
lg_eq "$code" 409 "instance 2 (60 s ahead of storage) does not take over"
code=$(lg_curl -o "$out" -w '%{http_code}' -H "$B" "$U2/v1/locks/skew/a")
lg_eq "$code" 200 "inspect"
lg_eq "$(lg_jget overdue "$out")" false "not overdue"
# And it does expire, by the storage's clock: ttl + margin later.
sleep 6.5 # ttl + 1 s margin + 1 s Date resolution
code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$B" "$U2/v1/locks/skew/a:acquire?ttl=10")
lg_eq "$code" 200 "takeover once expired on the storage's clock"
lg_fake "config?clock_offset_ms=0" >/dev/null

# 2. One instance's own clock runs 60 s ahead (libfaketime).
if [ -r "$FAKETIME_LIB" ] && [ -x build/lockgate ]; then
	code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$A" "$U1/v1/locks/skew/b:acquire?ttl=10")
	lg_eq "$code" 200 "acquire on instance 1"
	LG_BIN=build/lockgate \
	LG_ENV="LD_PRELOAD=$FAKETIME_LIB FAKETIME=+60s DONT_FAKE_MONOTONIC=1" lg_start
	code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$B" "$LG_URL/v1/locks/skew/b:acquire?ttl=10")
	lg_eq "$code" 409 "an instance 60 s ahead does not take over"
	code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$B" "$LG_URL/v1/locks/skew/b:acquire?ttl=10&wait=2")
	lg_eq "$code" 409 "nor while waiting"
	# The preload took: its log lines are stamped a minute ahead.
	stamp=$(lg_jget time "$LG_LOG")
	ahead=$(($(date -d "$stamp" +%s) - $(date +%s)))
	[ "$ahead" -ge 50 ] || lg_fail "faketime instance only $ahead s ahead"
	lg_stop
else
	echo "    faketime not installed: the libfaketime half was not run" >&2
	lg_fail "install Debian's faketime package (scripts/deps.sh test)"
fi
for p in $LG_PIDS; do lg_stop "$p"; done
echo ok
