#!/usr/bin/env bash
# Builds Dockerfile.hostsim with podman on base images made here from Debian's
# packages (no image registry is needed), runs it, and checks the image:
# /health, /v1/models and a chat completion through the published port, the
# HEALTHCHECK, the non-root user, and a .pte served from a read-only /model
# volume. Needs root on Debian (bookworm); nothing needs to be set by hand:
#
#   tools    installs podman, debootstrap, runc and curl with apt-get when missing
#   modules  go mod download on the host (the build runs with GOPROXY=off on the
#            host's module cache, mounted read-only)
#   bases    made once and kept in podman's storage (podman rmi them to redo):
#              hexserve-base/runtime  debootstrap --variant=minbase bookworm
#              hexserve-base/build    the same plus gcc, make, libc6-dev and the Go
#                                     toolchain of the host's go version, from the
#                                     Go module proxy (execute bits set on the copy)
#   runtime  the first OCI runtime of crun, runc that runs a container here (crun
#            fails on hosts with hybrid cgroups), with cgroupfs and file events,
#            in a containers.conf in this run's temp dir; ulimits nofile and
#            nproc at the hard limits a container's conmon has here (podman's
#            defaults exceed them on hosts without CAP_SYS_RESOURCE), passed to
#            every build and run
#   build, run, checks
# The step that fails is named on stderr. DEBIAN_MIRROR and DEBIAN_SUITE
# override the mirror and suite.
set -euo pipefail
cd "$(dirname "$0")/.."

MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=${DEBIAN_SUITE:-bookworm}
IMAGE=hexserve-hostsim:test
work=$(mktemp -d)
cids=()
step=setup
cleanup() {
	local rc=$?
	((rc == 0)) || echo "test-docker: FAILED in step: $step (exit $rc)" >&2
	for c in "${cids[@]}"; do podman rm -f -t 0 "$c" >/dev/null 2>&1 || true; done
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT
begin() { step=$1; echo "test-docker: [$(date +%T)] $1"; }
passed=0
ok() { passed=$((passed + 1)); echo "test-docker: $* ok"; }
fail() { echo "test-docker: $*" >&2; exit 1; }

begin tools
need=()
for t in podman debootstrap runc curl; do command -v "$t" >/dev/null 2>&1 || need+=("$t"); done
if ((${#need[@]})); then
	echo "test-docker: apt-get install ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >"$work/apt.log" 2>&1 || { tail -20 "$work/apt.log"; exit 1; }
fi
command -v go >/dev/null || fail "no go on PATH (the host's go makes the toolchain and module cache)"

begin modules
GOFLAGS=-mod=mod go mod download

# Engine settings for the podman commands of this run from the runtime probe
# on, and no others (podman's own containers.conf stays as it is).
conf() { # runtime
	export CONTAINERS_CONF=$work/containers.conf
	printf '[engine]\nruntime = "%s"\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n' "$1" >"$CONTAINERS_CONF"
}

base() { # name, extra packages
	local name=$1 include=$2
	local root=$work/$name
	if podman image exists "hexserve-base/$name"; then return; fi
	echo "test-docker: debootstrap $SUITE for hexserve-base/$name"
	debootstrap --variant=minbase --include="$include" "$SUITE" "$root" "$MIRROR" >"$work/$name.log" 2>&1 ||
		{ tail -20 "$work/$name.log"; fail "debootstrap $SUITE failed (log above)"; }
	if [[ $name == build ]]; then
		local v dir
		v=$(go env GOVERSION)
		dir=$(GOFLAGS=-mod=mod go mod download -json "golang.org/toolchain@v0.0.1-$v.linux-$(go env GOARCH)" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
		[[ -f $dir/bin/go ]] || fail "no Go toolchain $v from the module proxy"
		# Files from a module zip are read-only and not executable: make the
		# copy writable and set the execute bits as Go's toolchain switch does
		# (bin/* and pkg/tool/*/*).
		cp -a "$dir" "$root/usr/local/go"
		chmod -R u+w "$root/usr/local/go"
		chmod a+x "$root/usr/local/go/bin"/* "$root/usr/local/go/pkg/tool"/*/*
		[[ $("$root/usr/local/go/bin/go" version) == *"$v "* ]] || fail "the copied toolchain does not run as $v"
	fi
	rm -rf "$root/var/cache/apt/archives"/*.deb "$root/var/lib/apt/lists"/*
	tar -C "$root" -c . | podman import -q --change 'ENV PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "hexserve-base/$name" >/dev/null
	rm -rf "$root"
}
begin "base runtime"
base runtime ca-certificates
begin "base build"
base build ca-certificates,gcc,make,libc6-dev

begin "select runtime"
# The first runtime that starts a container (with small limits, which any host
# allows) selects itself; the hard limits of that container's conmon, which
# the runtime inherits and cannot raise, become the ulimits of every build and
# run. Podman's defaults (nofile 1048576, nproc 4194304) exceed them on hosts
# without CAP_SYS_RESOURCE, and podman lowers its own nproc below the shell's.
probe() { # runtime
	local c pid
	conf "$1"
	c=$(podman run -d --network none --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 hexserve-base/runtime sleep 60 2>"$work/probe-$1.log") ||
		{ echo "test-docker: $1 cannot run a container here: $(tail -n1 "$work/probe-$1.log")"; return 1; }
	cids+=("$c")
	pid=$(podman inspect --format '{{.State.ConmonPid}}' "$c")
	nofile=$(awk '/^Max open files/ {print $5}' "/proc/$pid/limits")
	nproc=$(awk '/^Max processes/ {print $4}' "/proc/$pid/limits")
	podman rm -f -t 0 "$c" >/dev/null
	[[ $nproc == unlimited ]] && nproc=-1
	ulimits=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
	podman run --rm --network none "${ulimits[@]}" hexserve-base/runtime true >"$work/probe-$1.log" 2>&1 ||
		{ echo "test-docker: $1 cannot run a container at nofile=$nofile nproc=$nproc: $(tail -n1 "$work/probe-$1.log")"; return 1; }
}
runtime=""
for rt in crun runc; do
	command -v "$rt" >/dev/null && probe "$rt" && { runtime=$rt; break; }
done
[[ -n $runtime ]] || fail "neither crun nor runc runs a container here"
echo "test-docker: runtime $runtime, ulimits nofile=$nofile nproc=$nproc"

begin "podman build"
# --format docker keeps the HEALTHCHECK (the OCI image format has none);
# --layers=false builds from the sources each time and leaves no stage images;
# the image of the last run goes first, so runs leave no untagged images behind.
podman rmi -f "$IMAGE" >/dev/null 2>&1 || true
podman build -q --layers=false --format docker -f Dockerfile.hostsim -t "$IMAGE" "${ulimits[@]}" \
	--build-arg BUILD_BASE=localhost/hexserve-base/build --build-arg RUNTIME_BASE=localhost/hexserve-base/runtime \
	--build-arg GOPROXY=off -v "$(go env GOMODCACHE):/root/go/pkg/mod:ro" . >"$work/build.log" 2>&1 ||
	{ tail -40 "$work/build.log"; exit 1; }

start() { # podman run arguments: starts a container, sets cid and url
	# Its HEALTHCHECK is run by hand below: podman's timer for it needs systemd
	# and, without, logs errors that are noise here (kept in run.log).
	cid=$(podman run -d "${ulimits[@]}" -p 127.0.0.1::8080 "$@" 2>"$work/run.log") ||
		{ cat "$work/run.log" >&2; fail "podman run $* failed"; }
	cids+=("$cid")
	url="http://$(podman port "$cid" 8080/tcp | head -n1)"
	for _ in $(seq 1 300); do
		[[ $(curl -s -o /dev/null -w '%{http_code}' "$url/health" || true) == 200 ]] && return
		sleep 0.2
	done
	podman logs "$cid" >&2 || true
	fail "$url/health did not answer 200 in 60 s"
}
check() { # name, expected substring, curl args...
	local name=$1 want=$2 out
	shift 2
	out=$(curl -sS --max-time 30 "$@")
	if [[ $out != *"$want"* ]]; then
		podman logs "$cid" >&2 || true
		fail "$name: got $out"
	fi
	ok "$name"
}
auth=()
chat() { # checks /v1/models and a chat completion of the first model, with "${auth[@]}"
	check /v1/models '"object":"list"' "$url/v1/models" "${auth[@]}"
	local model
	model=$(curl -s "$url/v1/models" "${auth[@]}" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p' | head -n1)
	check "chat completion ($model)" '"finish_reason"' "$url/v1/chat/completions" "${auth[@]}" -H 'Content-Type: application/json' \
		-d "{\"model\":\"$model\",\"messages\":[{\"role\":\"user\",\"content\":\"Say hello\"}],\"max_tokens\":8,\"temperature\":0}"
}

begin "image config"
[[ $(podman image inspect --format '{{.Config.ExposedPorts}}' "$IMAGE") == *8080/tcp* ]] || fail "the image exposes no 8080/tcp"
ok "EXPOSE 8080"
[[ $(podman image inspect --format '{{.Config.Healthcheck}}' "$IMAGE") == */health* ]] || fail "the image has no HEALTHCHECK on /health"
ok "HEALTHCHECK on /health"

begin "run the built-in bundle"
start "$IMAGE"
check /health '"status":"ok"' "$url/health"
chat
uid=$(podman exec "$cid" id -u)
[[ $uid != 0 ]] || fail "the server runs as root"
ok "non-root user (uid $uid)"
podman healthcheck run "$cid" >/dev/null || fail "HEALTHCHECK: not healthy"
ok "HEALTHCHECK run (healthy)"

begin "HEALTHCHECK with no server on 8080"
c=$(podman run -d "${ulimits[@]}" --network none "$IMAGE" --addr 127.0.0.1:9090 2>"$work/run.log") ||
	{ cat "$work/run.log" >&2; fail "podman run --addr failed"; }
cids+=("$c")
for _ in $(seq 1 300); do
	[[ $(podman logs "$c" 2>&1) == *'"message":"ready"'* ]] && break
	sleep 0.2
done
[[ $(podman logs "$c" 2>&1) == *'"message":"ready"'* ]] || fail "the server on 127.0.0.1:9090 did not get ready in 60 s"
! podman healthcheck run "$c" >/dev/null 2>&1 || fail "HEALTHCHECK: healthy with the server on 9090, not 8080"
ok "HEALTHCHECK run (unhealthy with the server on 9090)"

begin "run a .pte from a read-only /model volume"
mkdir -m 777 "$work/pte"
podman run --rm --network none --no-healthcheck "${ulimits[@]}" --user 0 -v "$work/pte:/out" --entrypoint hexserve "$IMAGE" \
	mkmodel --format pte --preset tiny --tokenizer /model/v79/tokenizer.json --out /out >"$work/mkpte.log" 2>&1 ||
	{ cat "$work/mkpte.log"; fail "mkmodel --format pte in the image failed"; }
start -v "$work/pte:/model:ro" -e HEXSERVE_API_KEYS=test-key "$IMAGE"
[[ $(curl -s -o /dev/null -w '%{http_code}' "$url/v1/models") == 401 ]] || fail "/v1/models without the key: not 401"
ok "/v1/models without the key (401)"
auth=(-H 'Authorization: Bearer test-key')
chat
[[ $(podman logs "$cid" 2>&1) == *'"pte":"/model/tinyllama-public.pte"'* ]] || fail "the server did not load the .pte from /model"
ok "served /model/tinyllama-public.pte"

step=done
echo "test-docker: $passed passed, 0 failed"
