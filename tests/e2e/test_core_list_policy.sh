#!/bin/sh
# A list under a policy shows only the locks the caller may read, and its
# page tokens never name one it may not: on gs:// Cloud Storage's own
# page tokens carry the object name a page stopped at, so they must not
# reach the caller.  Pages fill up past hidden locks, and a caller who
# pages through sees every lock it may read, once, in name order.
. tests/e2e/lib.sh
out=$LG_TMP/out
POL=$LG_TMP/policy.json
cat >"$POL" <<'JSON'
{"rules": [
  {"name": "ops takes and reads all", "match": {"sub": "ops"},
   "locks": ["**"], "actions": ["acquire", "read"]},
  {"name": "readers see open/ locks only", "match": {"sub": "reader"},
   "locks": ["*/open/**"], "actions": ["read"]}
]}
JSON
lg_start --policy "$POL"
exp=$(($(date +%s) + 600))
OPS="Authorization: Bearer $(lg_jwt "{\"sub\":\"ops\",\"exp\":$exp}")"
RD="Authorization: Bearer $(lg_jwt "{\"sub\":\"reader\",\"exp\":$exp}")"

# Hidden names sort before the reader's, between them and after them.
for n in a/open/1 a/shut/1 a/shut/2 b/open/2 b/shut/x b/shut/y b/shut/z \
    c/open/3 c/open/4 c/shut/q d/open/5 0/shut z/shut; do
	code=$(lg_curl -o "$out" -w '%{http_code}' -X POST -H "$OPS" \
	    "$LG_URL/v1/locks/$n:acquire?ttl=600")
	lg_eq "$code" 200 "ops acquires $n"
done

# LIST HEADER PAGE_SIZE: page through; prints the names seen, one per
# line, and checks each token is the last visible name of its page.
list_all() {
	tok=""
	pages=0
	: >"$LG_TMP/seen"
	while [ $pages -lt 30 ]; do
		code=$(lg_curl -o "$out" -w '%{http_code}' -H "$1" \
		    "$LG_URL/v1/locks?page_size=$2&page_token=$tok")
		lg_eq "$code" 200 "list page $pages (size $2)"
		python3 - "$out" "$2" >>"$LG_TMP/seen" <<'PY' || lg_fail "page $pages (size $2) is wrong"
import json, sys
d = json.load(open(sys.argv[1]))
names = [l["name"] for l in d["locks"]]
tok = d.get("next_page_token")
size = int(sys.argv[2])
if tok is not None:
    # More follows: the page is full and its token is its last name.
    assert len(names) == size, (names, size)
    assert tok == names[-1], (tok, names)
for n in names:
    print(n)
print("TOKEN " + (tok or ""))
PY
		tok=$(sed -n 's/^TOKEN //p' "$LG_TMP/seen" | tail -n 1)
		pages=$((pages + 1))
		[ -n "$tok" ] || break
	done
	[ -z "$tok" ] || lg_fail "no end after 30 pages (size $2)"
	grep -v '^TOKEN' "$LG_TMP/seen" | tr '\n' ' '
}

for size in 1 2 3 100; do
	lg_eq "$(list_all "$RD" $size)" "a/open/1 b/open/2 c/open/3 c/open/4 d/open/5 " \
	    "reader's listing, pages of $size"
	# No page token nor lock the reader got names a lock it may not read.
	grep -E 'shut' "$LG_TMP/seen" &&
	    lg_fail "a hidden name reached the reader (pages of $size)"
done
lg_eq "$(list_all "$OPS" 4)" "0/shut a/open/1 a/shut/1 a/shut/2 b/open/2 b/shut/x b/shut/y b/shut/z c/open/3 c/open/4 c/shut/q d/open/5 z/shut " \
    "ops lists all, pages of 4"

# A token is a lock name and nothing else; one from elsewhere is refused.
code=$(lg_curl -o "$out" -w '%{http_code}' -H "$RD" \
    "$LG_URL/v1/locks?page_token=b/shut")
lg_eq "$code" 200 "a name as a token lists after it"
lg_eq "$(python3 -c 'import json,sys; print(" ".join(l["name"] for l in json.load(sys.stdin)["locks"]))' <"$out")" \
    "c/open/3 c/open/4 d/open/5" "the locks after b/shut"
code=$(lg_curl -o "$out" -w '%{http_code}' -H "$RD" \
    "$LG_URL/v1/locks?page_token=a%20b")
lg_eq "$code" 400 "a token that is no lock name"
lg_eq "$(lg_json error.code <"$out")" bad_page_token "its code"
lg_stop
