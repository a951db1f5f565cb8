#!/bin/sh
# test_docker.sh: what can be checked of docker/ without a Docker engine.
#  1. Every shared library `ldd build/lockgate` loads maps (dpkg -S) to a
#     Debian package that the runtime stage installs, by name or as a
#     dependency of a named package; every DT_NEEDED library's package is
#     named (libc6 aside: it is in every Debian image).
#  2. The build stage's RUN lines call `make -jN` and nothing else.
#  3. The runtime stage: bookworm, no compiler or -dev package, CA
#     certificates, a non-root USER, PORT and an /healthz HEALTHCHECK.
#     The user and group are both lockgate, 10001, and USER names them:
#     the groupadd/useradd lines are read option by option and, as root,
#     run for real with --prefix on a copy of /etc (the passwd, group and
#     home directory they make are checked).
#  4. docker/cloudrun.yaml: request timeout above LOCKGATE_MAX_WAIT,
#     concurrency, min instances, probes, no reserved PORT variable.
#  5. The HEALTHCHECK command itself, run against a live lockgate (exit 0)
#     and against a closed port (exit non-zero).
set -eu
cd "$(dirname "$0")/../.."

BIN=build/lockgate
DF=docker/Dockerfile
CR=docker/cloudrun.yaml
[ -x "$BIN" ] || { echo "FAIL: $BIN not built (make)"; exit 1; }
[ -f "$DF" ] || { echo "FAIL: no $DF"; exit 1; }
[ -f "$CR" ] || { echo "FAIL: no $CR"; exit 1; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# 1a. ldd -> files -> packages.  usrmerge: ldd may say /lib/... while dpkg
# recorded /usr/lib/... (or the reverse), so try both and the realpath.
ldd "$BIN" >"$TMP/ldd"
if grep -q 'not found' "$TMP/ldd"; then
	echo "FAIL: unresolved libraries:"; grep 'not found' "$TMP/ldd"; exit 1
fi
: >"$TMP/cands"
awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }' "$TMP/ldd" |
    sort -u >"$TMP/libs"
while read -r f; do
	printf '%s\n%s\n%s\n' "$f" "$(readlink -f "$f")" "/usr$f" >>"$TMP/cands"
	case "$f" in /usr/*) echo "${f#/usr}" >>"$TMP/cands" ;; esac
done <"$TMP/libs"
# One dpkg -S for every candidate path (it is slow per call); lines are
# "pkg[:arch]: /path"; absent paths only print to stderr.
# shellcheck disable=SC2046
dpkg -S $(sort -u "$TMP/cands") 2>/dev/null |
    sed -n 's/^\([^:, ]*\)\(:[^:]*\)\{0,1\}: \(\/.*\)$/\3 \1/p' >"$TMP/owners"
: >"$TMP/pkgs"
while read -r f; do
	pkg=""
	for cand in "$f" "$(readlink -f "$f")" "/usr$f" "${f#/usr}"; do
		pkg=$(awk -v p="$cand" '$1 == p { print $2; exit }' "$TMP/owners")
		[ -n "$pkg" ] && break
	done
	[ -n "$pkg" ] || { echo "FAIL: no Debian package owns $f"; exit 1; }
	echo "$pkg $f" >>"$TMP/pkgs"
done <"$TMP/libs"
nlib=$(wc -l <"$TMP/pkgs")
[ "$nlib" -ge 3 ] || { echo "FAIL: only $nlib libraries from ldd"; exit 1; }

# 1b. DT_NEEDED entries -> packages (resolved through the ldd map).
readelf -d "$BIN" | sed -n 's/.*(NEEDED).*\[\(.*\)\].*/\1/p' >"$TMP/needed"
: >"$TMP/direct"
while read -r so; do
	p=$(awk -v so="$so" '{ n = split($2, a, "/"); if (a[n] == so) print $1 }' \
	    "$TMP/pkgs" | head -n 1)
	[ -n "$p" ] || { echo "FAIL: NEEDED $so not in ldd output"; exit 1; }
	echo "$p" >>"$TMP/direct"
done <"$TMP/needed"

# The installed package database: Package, Depends, Pre-Depends, Provides.
dpkg-query -W -f='${Package}\t${Depends}\t${Pre-Depends}\t${Provides}\n' \
    >"$TMP/db"

python3 - "$DF" "$CR" "$TMP/pkgs" "$TMP/direct" "$TMP/db" <<'PY'
import os, re, shlex, sys

df_path, cr_path, pkgs_path, direct_path, db_path = sys.argv[1:6]
fails = []

def fail(msg):
    fails.append(msg)

# ---- Dockerfile: instructions with continuations joined, comments dropped.
instrs = []
cur = ""
for raw in open(df_path):
    line = raw.rstrip("\n")
    if not cur and (line.strip().startswith("#") or not line.strip()):
        continue
    if cur and line.strip().startswith("#"):
        continue  # a comment inside a continued instruction
    if line.endswith("\\"):
        cur += line[:-1] + " "
        continue
    cur += line
    kw, _, rest = cur.strip().partition(" ")
    instrs.append((kw.upper(), rest.strip()))
    cur = ""
stages = []
for kw, rest in instrs:
    if kw == "FROM":
        stages.append({"from": rest, "instrs": []})
    elif stages:
        stages[-1]["instrs"].append((kw, rest))
    elif kw != "ARG":
        fail("instruction before the first FROM: " + kw)
if len(stages) < 2:
    fail("Dockerfile is not multi-stage (%d stage)" % len(stages))
    print("\n".join("FAIL: " + f for f in fails)); sys.exit(1)
build, runtime = stages[0], stages[-1]

# ---- 2. The build stage calls make and nothing else.
if "bookworm" not in build["from"]:
    fail("build stage is not Debian bookworm: " + build["from"])
runs = [r for k, r in build["instrs"] if k == "RUN"]
if not runs:
    fail("build stage has no RUN make")
for r in runs:
    cmd = r
    if cmd.startswith("["):
        cmd = " ".join(re.findall(r'"([^"]*)"', cmd))
    if not re.fullmatch(r'make -j(\d+|"?\$\(nproc\)"?)?', cmd.strip()):
        fail("build stage RUN is not just `make -jN` (one compiler per "
             "core): " + r)
for k, r in build["instrs"]:
    if k not in ("RUN", "COPY", "WORKDIR", "ENV", "ARG", "LABEL"):
        fail("unexpected instruction in the build stage: " + k)

# ---- 3. The runtime stage.
if not re.match(r"(docker\.io/library/)?debian:bookworm(-slim)?(@\S+)?(\s|$)",
                runtime["from"]):
    fail("runtime stage is not debian:bookworm[-slim]: " + runtime["from"])
installed = []
for k, r in runtime["instrs"]:
    if k != "RUN":
        continue
    for seg in re.split(r"&&|;|\|\|", r):
        toks = seg.split()
        if "apt-get" in toks and "install" in toks:
            for t in toks[toks.index("install") + 1:]:
                if not t.startswith("-"):
                    installed.append(t)
if not installed:
    fail("runtime stage installs no package with apt-get install")
for p in installed:
    if p.endswith("-dev") or p in ("gcc", "make", "build-essential",
                                    "curl", "wget", "pkg-config"):
        fail("runtime stage installs a build or debug tool: " + p)
if "ca-certificates" not in installed:
    fail("runtime stage does not install ca-certificates")
users = [r for k, r in runtime["instrs"] if k == "USER"]
if not users:
    fail("runtime stage has no USER (it would run as root)")
elif users[-1].split(":")[0] in ("root", "0"):
    fail("runtime stage runs as root: USER " + users[-1])
elif users[-1].strip() not in ("10001:10001", "lockgate:lockgate"):
    fail("USER is not the user and group lockgate, 10001: USER " + users[-1])

# The account: groupadd and useradd, read option by option.  Each command
# is also written out (one per line, shell-quoted) for the live run below.
def opts(toks, longs):
    """toks after the command name -> ({option: value}, [operands])."""
    got, ops, i = {}, [], 0
    while i < len(toks):
        t = toks[i]
        if t.startswith("--") and "=" in t:
            k, v = t.split("=", 1)
            got[k] = v
        elif t in longs and longs[t]:
            got[longs[t]] = toks[i + 1] if i + 1 < len(toks) else ""
            i += 1
        elif t.startswith("-"):
            got[longs.get(t, t)] = True
        else:
            ops.append(t)
        i += 1
    return got, ops
GA = {"-g": "--gid", "--gid": "--gid"}
UA = {"-u": "--uid", "--uid": "--uid", "-g": "--gid", "--gid": "--gid",
      "-d": "--home-dir", "--home-dir": "--home-dir", "-s": "--shell",
      "--shell": "--shell", "-U": None, "-N": None, "-l": None, "-m": None,
      "-r": None, "-G": "--groups", "--groups": "--groups"}
acct = []
gadd = uadd = None
for k, r in runtime["instrs"]:
    if k != "RUN":
        continue
    for seg in re.split(r"&&|;|\|\|", r):
        toks = shlex.split(seg)
        if toks and toks[0] in ("groupadd", "useradd"):
            acct.append(toks)
            o = opts(toks[1:], GA if toks[0] == "groupadd" else UA)
            if toks[0] == "groupadd":
                gadd = o
            else:
                uadd = o
if not gadd or gadd[1] != ["lockgate"] or gadd[0].get("--gid") != "10001":
    fail("runtime stage does not make the group lockgate with gid 10001 "
         "(groupadd --gid 10001 lockgate)")
if not uadd or uadd[1] != ["lockgate"] or uadd[0].get("--uid") != "10001":
    fail("runtime stage does not make the user lockgate with uid 10001")
elif uadd[0].get("--gid") not in ("10001", "lockgate"):
    fail("useradd does not put lockgate in the group 10001 (--gid 10001)")
elif "--user-group" in uadd[0] or "-U" in uadd[0]:
    fail("useradd --user-group makes a second group with a system gid")
with open(db_path + ".acct", "w") as f:
    for toks in acct:
        f.write(shlex.join(toks) + "\n")
if not any(k == "COPY" and "--from=" in r and "build/lockgate" in r
           for k, r in runtime["instrs"]):
    fail("runtime stage does not COPY build/lockgate from the build stage")
if not any(k == "ENV" and re.search(r"\bPORT[= ]", r)
           for k, r in runtime["instrs"]):
    fail("runtime stage does not set a default PORT")
hc = [r for k, r in runtime["instrs"] if k == "HEALTHCHECK"]
if not hc or "/healthz" not in hc[-1]:
    fail("runtime stage has no HEALTHCHECK on /healthz")
else:
    m = re.search(r"\bCMD\s+(.*)$", hc[-1])
    if not m:
        fail("HEALTHCHECK has no CMD")
    else:
        open(db_path + ".hc", "w").write(m.group(1) + "\n")
ep = [r for k, r in runtime["instrs"] if k in ("ENTRYPOINT", "CMD")]
if any("127.0.0.1" in r for r in ep):
    fail("the container would listen on loopback only")
for k, r in runtime["instrs"]:
    if k == "RUN" and re.search(r"\b(gcc|cc|make)\b", r):
        fail("runtime stage compiles something: " + r)

# ---- 1. Libraries -> packages the runtime stage provides.
db, provides = {}, {}
for line in open(db_path):
    f = line.rstrip("\n").split("\t")
    if len(f) < 4:
        continue
    db[f[0]] = (f[1] + "," + f[2])
    for v in f[3].split(","):
        v = v.strip().split(" ")[0]
        if v:
            provides.setdefault(v, []).append(f[0])

def deps(p):
    out = []
    for group in db.get(p, "").split(","):
        for alt in group.split("|"):
            name = alt.strip().split(" ")[0].split(":")[0]
            if not name:
                continue
            if name in db:
                out.append(name)
            out.extend(provides.get(name, []))
    return out

closure, todo = set(), list(installed)
while todo:
    p = todo.pop()
    if p in closure:
        continue
    closure.add(p)
    todo.extend(deps(p))

for line in open(pkgs_path):
    pkg, path = line.split()
    if pkg not in closure:
        fail("%s (%s) is needed by build/lockgate but the runtime stage "
             "installs neither it nor a package depending on it" % (pkg, path))
for pkg in sorted(set(l.strip() for l in open(direct_path) if l.strip())):
    if pkg != "libc6" and pkg not in installed:
        fail("%s provides a DT_NEEDED library: name it in the runtime "
             "stage's apt-get install" % pkg)
loaded = set(l.split()[0] for l in open(pkgs_path))
for pkg in installed:
    if pkg != "ca-certificates" and pkg not in loaded:
        fail("runtime stage installs %s, which build/lockgate does not load "
             "(only the libraries it needs, plus CA certificates)" % pkg)
for pkg in installed:
    if pkg not in db:
        fail("runtime package %s is not a bookworm package installed here "
             "(misspelt?)" % pkg)

# ---- 4. cloudrun.yaml (stdlib only: targeted regexes, not a YAML parser).
cr = open(cr_path).read()
def num(key):
    m = re.search(r"^\s*%s:\s*\"?(\d+)\"?\s*$" % re.escape(key), cr, re.M)
    return int(m.group(1)) if m else None
if not re.search(r"^apiVersion:\s*serving\.knative\.dev/v1\s*$", cr, re.M):
    fail("cloudrun.yaml: apiVersion is not serving.knative.dev/v1")
if not re.search(r"^kind:\s*Service\s*$", cr, re.M):
    fail("cloudrun.yaml: kind is not Service")
timeout = num("timeoutSeconds")
conc = num("containerConcurrency")
m = re.search(r"name:\s*LOCKGATE_MAX_WAIT\s*\n\s*value:\s*\"?(\d+)\"?", cr)
maxwait = int(m.group(1)) if m else 290  # lockgate's default
if timeout is None or not (maxwait + 10 <= timeout <= 3600):
    fail("cloudrun.yaml: timeoutSeconds %s must exceed LOCKGATE_MAX_WAIT %d "
         "by >= 10 s (and be <= 3600)" % (timeout, maxwait))
if conc is None or not (1 <= conc <= 1000):
    fail("cloudrun.yaml: containerConcurrency %s not in 1..1000" % conc)
if num("autoscaling.knative.dev/minScale") is None:
    fail("cloudrun.yaml: no autoscaling.knative.dev/minScale")
for probe, path in (("startupProbe", "/readyz"), ("livenessProbe", "/healthz")):
    m = re.search(r"%s:\s*\n\s*httpGet:\s*\n\s*path:\s*(\S+)" % probe, cr)
    if not m or m.group(1) != path:
        fail("cloudrun.yaml: %s is not an httpGet on %s" % (probe, path))
m = re.search(r"%s:.*?failureThreshold:\s*(\d+)" % "startupProbe", cr, re.S)
p = re.search(r"startupProbe:.*?periodSeconds:\s*(\d+)", cr, re.S)
if m and p and int(m.group(1)) * int(p.group(1)) > 240:
    fail("cloudrun.yaml: startup window above Cloud Run's 240 s")
if re.search(r"name:\s*PORT\s*$", cr, re.M):
    fail("cloudrun.yaml: PORT is reserved by Cloud Run; set containerPort")
if not re.search(r"containerPort:\s*8080", cr):
    fail("cloudrun.yaml: containerPort 8080 missing")
if not re.search(r"name:\s*GOOGLE_CLOUD_PROJECT\s*\n\s*value:\s*\S+", cr):
    fail("cloudrun.yaml: GOOGLE_CLOUD_PROJECT unset: log lines lose their trace")
if not re.search(r"name:\s*LOCKGATE_STORE\s*\n\s*value:\s*gs://", cr):
    fail("cloudrun.yaml: LOCKGATE_STORE is not a gs:// URL")
# lockgate refuses a JWKS without a policy, and the policy file must be
# mounted where LOCKGATE_POLICY points.
if re.search(r"name:\s*LOCKGATE_JWKS_URL\s*$", cr, re.M):
    m = re.search(r"name:\s*LOCKGATE_POLICY\s*\n\s*value:\s*(\S+)", cr)
    mounts = re.findall(r"mountPath:\s*(\S+)", cr)
    if not m:
        fail("cloudrun.yaml: LOCKGATE_JWKS_URL without LOCKGATE_POLICY "
             "(lockgate would refuse to start)")
    elif os.path.dirname(m.group(1)) not in mounts:
        fail("cloudrun.yaml: LOCKGATE_POLICY %s is in no mounted volume"
             % m.group(1))

if fails:
    print("\n".join("FAIL: " + f for f in fails))
    sys.exit(1)
print("docker: %d libraries from %d packages covered; runtime installs %s"
      % (sum(1 for _ in open(pkgs_path)),
         len(set(l.split()[0] for l in open(pkgs_path))), " ".join(installed)))
PY

# 3b. The account lines for real, as root (useradd --prefix needs root),
# on a copy of this Debian's /etc: the user, the group and the home.
if [ "$(id -u)" = 0 ]; then
	R=$TMP/root
	mkdir -p "$R/etc"
	for f in passwd group shadow gshadow login.defs; do
		[ -f "/etc/$f" ] && cp "/etc/$f" "$R/etc/"
	done
	while read -r cmd rest; do
		eval "$cmd --prefix \"\$R\" $rest" ||
		    { echo "FAIL: the Dockerfile's $cmd failed: $cmd $rest"; exit 1; }
	done <"$TMP/db.acct"
	pw=$(grep '^lockgate:' "$R/etc/passwd" | cut -d: -f3,4)
	gr=$(grep '^lockgate:' "$R/etc/group" | cut -d: -f3)
	home=$(grep '^lockgate:' "$R/etc/passwd" | cut -d: -f6)
	[ "$pw" = 10001:10001 ] ||
	    { echo "FAIL: user lockgate is uid:gid '$pw', want 10001:10001"; exit 1; }
	[ "$gr" = 10001 ] ||
	    { echo "FAIL: group lockgate has gid '$gr', want 10001"; exit 1; }
	own=$(stat -c %u:%g "$R$home")
	[ "$own" = 10001:10001 ] ||
	    { echo "FAIL: home $home is owned by $own, want 10001:10001"; exit 1; }
	echo "docker: user and group lockgate are 10001:10001, home $home"
else
	echo "docker: not root, so the account lines were read, not run"
fi

# 5. The HEALTHCHECK command, for real, when the e2e harness exists.
HC=$(cat "$TMP/db.hc")
if PORT=1 sh -c "$HC" >/dev/null 2>&1; then
	echo "FAIL: HEALTHCHECK passes against a closed port"; exit 1
fi
if [ -f tests/e2e/lib.sh ]; then
	trap - EXIT
	rm -rf "$TMP"
	. tests/e2e/lib.sh
	LG_BIN=$BIN lg_start
	port=${LG_URL##*:}
	port=${port%%/*}
	PORT=$port sh -c "$HC" || lg_fail "HEALTHCHECK fails on a live lockgate"
	lg_stop "$LG_PID"
else
	echo "FAIL: tests/e2e/lib.sh missing: the HEALTHCHECK was not run live"
	exit 1
fi
echo ok
