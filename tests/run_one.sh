#!/bin/sh
# run_one.sh NAME COMMAND ARG...: one test of tests/run.sh.  Its output
# goes to build/logs/NAME.log, its exit status to build/logs/NAME.status;
# one line says how it went (with the end of its log when it failed).
name=$1
shift
start=$(date +%s)
"$@" >"build/logs/$name.log" 2>&1 </dev/null
st=$?
echo "$st" >"build/logs/$name.status"
secs=$(($(date +%s) - start))
case $st in
0) echo "PASS $name ($secs s)" ;;
77) echo "SKIP $name: $(sed -n 's/^SKIP: //p' "build/logs/$name.log" | head -n 1)" ;;
*)
	# One write, so that a parallel test's line does not land inside it.
	printf 'FAIL %s (%s s, status %s), log follows:\n%s\n' "$name" \
	    "$secs" "$st" "$(tail -n 60 "build/logs/$name.log" | sed 's/^/    /')"
	;;
esac
exit 0
