#!/bin/sh
# test_docker_image.sh: docker/Dockerfile built and run for real, where a
# container engine (docker or podman) answers and the base images are here
# or can be pulled; otherwise a skip (exit 77) that says which.  The checks
# that need no engine are in test_docker.sh.
#  1. The image builds from sources (the build stage compiles; nothing of
#     the host's build/ is reused).
#  2. It runs as 10001:10001, the user and the group named lockgate.
#  3. lockgate starts in it as that user with only PORT and a secret set,
#     answers /healthz and /readyz on the default file:// store in its
#     home, and exits 0 on SIGTERM.
# Where the engine builds but cannot start containers (some nested
# sandboxes refuse its OCI runtime's setrlimit or cgroups), 2 and 3 run as
# root in a chroot of the exported image instead: the same files, user
# database and libraries.
. tests/e2e/lib.sh
E=""
for e in docker podman; do
	if command -v "$e" >/dev/null 2>&1 && timeout 20 "$e" info >/dev/null 2>&1; then
		E=$e
		break
	fi
done
[ -n "$E" ] || lg_skip "no container engine here (neither docker info nor podman info answers)"
IMG=localhost/lockgate-e2e-$$
CID=""
cleanup_image() {
	[ -n "$CID" ] && "$E" rm -f "$CID" >/dev/null 2>&1
	"$E" rmi -f "$IMG" >/dev/null 2>&1
	lg_cleanup
}
trap cleanup_image EXIT

# The base images: here already, or pulled (at most 2 minutes each).
for img in $(sed -n 's/^FROM[[:space:]]\{1,\}\([^[:space:]]*\).*/\1/p' docker/Dockerfile); do
	"$E" image inspect "$img" >/dev/null 2>&1 && continue
	if ! timeout 120 "$E" pull "$img" >"$LG_TMP/pull" 2>&1; then
		lg_skip "$E: base image $img is not here and cannot be pulled: $(tail -n 1 "$LG_TMP/pull" | cut -c1-240)"
	fi
done

# 1. Build.  podman: chroot isolation (no OCI runtime needed for RUN) and
# the Dockerfile's own ignore file, which BuildKit finds by itself.
if [ "$E" = podman ]; then
	set -- --isolation chroot --ignorefile docker/Dockerfile.dockerignore
else
	set --
fi
if ! timeout 1200 "$E" build "$@" --network host -f docker/Dockerfile -t "$IMG" . >"$LG_TMP/build" 2>&1; then
	tail -n 40 "$LG_TMP/build" >&2
	lg_fail "$E build failed"
fi
grep -q -- "-c -o build/obj/server/main.o server/main.c" "$LG_TMP/build" ||
    lg_fail "the build stage did not compile server/main.c (host objects reused?)"
user=$("$E" image inspect -f '{{.Config.User}}' "$IMG")
lg_eq "$user" 10001:10001 "the image's USER"
echo "ok 1 - $E built the image; USER $user"

# 2 and 3: in a container, or in a chroot of the exported image.
SECRET=image-test-secret-0123456789abcdef0123456789
R=""
if ! "$E" run --rm --network host --entrypoint id "$IMG" >"$LG_TMP/id" 2>&1; then
	[ "$(id -u)" = 0 ] ||
	    lg_skip "$E builds but cannot start a container here ($(tail -n 1 "$LG_TMP/id" | cut -c1-120)), and a chroot needs root"
	echo "# $E cannot start containers here ($(tail -n 1 "$LG_TMP/id" | cut -c1-120)): chroot of the exported image"
	R=$LG_TMP/rootfs
	mkdir -p "$R"
	chmod 755 "$R"
	CID=$("$E" create "$IMG") || lg_fail "$E create"
	"$E" export "$CID" | tar -x -C "$R" || lg_fail "$E export"
	/usr/sbin/chroot --userspec=10001:10001 "$R" id >"$LG_TMP/id" 2>&1 || lg_fail "chroot id: $(cat "$LG_TMP/id")"
fi
lg_eq "$(cat "$LG_TMP/id")" "uid=10001(lockgate) gid=10001(lockgate) groups=10001(lockgate)" "id in the image"
echo "ok 2 - $(cat "$LG_TMP/id")"

port=$(lg_free_port) || lg_fail "no free port"
if [ -z "$R" ]; then
	"$E" run --rm --network host -e PORT="$port" -e LOCKGATE_JWT_SECRET="$SECRET" \
	    --name "lockgate-e2e-$$" "$IMG" >"$LG_TMP/run" 2>&1 &
else
	env -i PORT="$port" LOCKGATE_JWT_SECRET="$SECRET" /usr/sbin/chroot --userspec=10001:10001 "$R" \
	    /bin/sh -c 'cd /var/lib/lockgate && exec /usr/local/bin/lockgate' >"$LG_TMP/run" 2>&1 &
fi
rp=$!
i=0
until [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$port/healthz")" = 200 ]; do
	i=$((i + 1))
	[ $i -lt 100 ] && kill -0 "$rp" 2>/dev/null || { cat "$LG_TMP/run" >&2; lg_fail "lockgate in the image did not answer /healthz"; }
	sleep 0.1
done
lg_eq "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$port/readyz")" 200 \
    "/readyz (the file store in the home of 10001)"
if [ -z "$R" ]; then
	"$E" kill --signal TERM "lockgate-e2e-$$" >/dev/null
else
	kill -TERM "$rp"
fi
job_st=124
i=0
while kill -0 "$rp" 2>/dev/null && [ $i -lt 200 ]; do
	sleep 0.05
	i=$((i + 1))
done
kill -0 "$rp" 2>/dev/null && { kill -KILL "$rp"; lg_fail "lockgate in the image ignored SIGTERM for 10 s"; }
wait "$rp"
job_st=$?
lg_eq "$job_st" 0 "lockgate's exit status after SIGTERM"
if [ -n "$R" ]; then
	lg_eq "$(stat -c %u:%g "$R/var/lib/lockgate/lockgate-data")" 10001:10001 "owner of the store it made"
fi
echo "ok 3 - lockgate served in the image as 10001:10001 and exited 0 on SIGTERM"
echo ok
