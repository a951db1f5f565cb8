# lib_front.sh: an HTTP/2 TLS front (nghttpx, Debian's nghttp2-proxy) to
# the fake GCS, for the gs:// suites over https.  Source it after lib.sh
# with LG_STORE=gs.  nghttpx speaks h2 (and HTTP/1.1) over TLS to lockgate
# and HTTP/1.1 to the fake, as Cloud Storage's front ends do; its access
# log records, per request, the client's port and the protocol ALPN chose,
# so a test counts lockgate's connections to the front itself (the fake's
# own connection counter counts nghttpx's, which is not the same thing).
# Its own variables start with _lgn_.

command -v nghttpx >/dev/null 2>&1 ||
    lg_skip "nghttpx is missing (Debian package nghttp2-proxy: sh scripts/deps.sh test)"

openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 -keyout "$LG_TMP/key.pem" \
    -out "$LG_TMP/cert.pem" >/dev/null 2>&1 || lg_fail "openssl req"
LG_FRONT_FAKE=${LG_FAKE_GCS_URL#http://}
# A port for the front, kept across its restarts (nghttpx binds with
# SO_REUSEADDR).
LG_FRONT_PORT=$(lg_free_port) ||
    lg_fail "no free port"
LG_FRONT_PID=""
# lockgate on the front: storage over https, the token from the fake's
# metadata server (plain http, as the real one is).
unset STORAGE_EMULATOR_HOST
LG_FRONT_ENV="GCE_METADATA_HOST=$LG_FRONT_FAKE LOCKGATE_GCS_ENDPOINT=https://127.0.0.1:$LG_FRONT_PORT LOCKGATE_GCS_CA_FILE=$LG_TMP/cert.pem"

# lg_front_start LOG [ALPN]: start nghttpx on LG_FRONT_PORT, its access
# log (one line per request: "client_port alpn status method path") in
# LOG; ALPN (default h2,http/1.1) is what it offers.  Waits (at most 5 s)
# until it answers.  Sets LG_FRONT_PID.
lg_front_start() {
	: >"$1"
	nghttpx --conf=/dev/null -f"127.0.0.1,$LG_FRONT_PORT" \
	    -b"127.0.0.1,${LG_FRONT_FAKE#*:}" --npn-list="${2:-h2,http/1.1}" \
	    --accesslog-file="$1" \
	    --accesslog-format='$remote_port $alpn $status $method $path' \
	    --errorlog-file="$LG_TMP/nghttpx.err" \
	    "$LG_TMP/key.pem" "$LG_TMP/cert.pem" 2>>"$LG_TMP/nghttpx.err" &
	LG_FRONT_PID=$!
	LG_PIDS="$LG_PIDS $LG_FRONT_PID"
	_lgn_i=0
	while [ $_lgn_i -lt 100 ]; do
		curl -s -o /dev/null --max-time 2 --cacert "$LG_TMP/cert.pem" \
		    "https://127.0.0.1:$LG_FRONT_PORT/_fake/stats" && break
		kill -0 "$LG_FRONT_PID" 2>/dev/null ||
		    { cat "$LG_TMP/nghttpx.err" >&2; lg_fail "nghttpx exited"; }
		sleep 0.05
		_lgn_i=$((_lgn_i + 1))
	done
	[ $_lgn_i -lt 100 ] || lg_fail "nghttpx did not answer within 5 s"
	: >"$1" # that probe is not lockgate's
}

# lg_front_stop [SIGNAL]: stop the front (default TERM; QUIT is nghttpx's
# graceful shutdown: GOAWAY, in-flight streams finish, then it exits),
# waiting at most 10 s, then SIGKILL.
lg_front_stop() {
	kill -"${1:-TERM}" "$LG_FRONT_PID" 2>/dev/null || true
	_lgn_i=0
	while kill -0 "$LG_FRONT_PID" 2>/dev/null && [ $_lgn_i -lt 200 ]; do
		# A zombie answers kill -0 until reaped: reap it when it is one.
		case $(ps -o stat= -p "$LG_FRONT_PID" 2>/dev/null) in Z*) break ;; esac
		sleep 0.05
		_lgn_i=$((_lgn_i + 1))
	done
	kill -KILL "$LG_FRONT_PID" 2>/dev/null || true
	wait "$LG_FRONT_PID" 2>/dev/null || true
	LG_PIDS=$(echo "$LG_PIDS" | sed "s/ $LG_FRONT_PID\b//")
	LG_FRONT_PID=""
}

# lg_front_conns LOG: the client connections seen in access log LOG
# (distinct client ports).
lg_front_conns() {
	awk '{ print $1 }' "$1" | sort -u | wc -l | tr -d ' '
}

# lg_front_conns_at_once LOG: the most client connections in use at once in
# access log LOG: a connection is in use from its first request to its
# last (by line), and the largest number of such spans that overlap.  A
# connection the client replaces (one closes, the next opens) does not
# count twice, as it does in lg_front_conns.
lg_front_conns_at_once() {
	awk '{ if (!($1 in first)) first[$1] = NR; last[$1] = NR }
	END {
		for (p in first) { open[first[p]]++; shut[last[p]]++ }
		for (i = 1; i <= NR; i++) {
			n += open[i]
			if (n > max) max = n
			n -= shut[i]
		}
		print max + 0
	}' "$1"
}

# lg_front_alpns LOG: the protocols chosen, distinct, space-separated.
lg_front_alpns() {
	awk '{ print $2 }' "$1" | sort -u | tr '\n' ' ' | sed 's/ $//'
}
