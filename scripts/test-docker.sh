#!/usr/bin/env bash
# Builds Dockerfile.hostsim with podman on base images made here from Debian's
# packages (no image registry is needed), runs it, and checks /health,
# /v1/models and one chat completion through the published port.
#
# Needs root, podman and debootstrap (apt-get install podman debootstrap).
# The bases are built once and kept in podman's storage:
#   hexserve-base/runtime  debootstrap --variant=minbase bookworm
#   hexserve-base/build    the same plus gcc, make, libc6-dev and the Go toolchain
#                          of go.mod's version from the Go module proxy
# Modules come from the host's module cache (mounted read-only, GOPROXY=off).
set -euo pipefail
cd "$(dirname "$0")/.."

MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=${DEBIAN_SUITE:-bookworm}
IMAGE=hexserve-hostsim:test
work=$(mktemp -d)
cid=""
cleanup() {
	[[ -n $cid ]] && podman rm -f "$cid" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

base() { # name, extra packages
	local name=$1 include=$2
	if podman image exists "hexserve-base/$name"; then return; fi
	echo "test-docker: debootstrap $SUITE for hexserve-base/$name"
	debootstrap --variant=minbase --include="$include" "$SUITE" "$work/$name" "$MIRROR" >"$work/$name.log" 2>&1 ||
		{ tail -20 "$work/$name.log"; exit 1; }
	if [[ $name == build ]]; then
		local v dir
		v=$(go env GOVERSION)
		dir=$(GOFLAGS=-mod=mod go mod download -json "golang.org/toolchain@v0.0.1-$v.linux-$(go env GOARCH)" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
		[[ -x $dir/bin/go ]] || { echo "test-docker: no Go toolchain $v from the module proxy" >&2; exit 1; }
		cp -a "$dir" "$work/$name/usr/local/go"
		chmod -R u+w "$work/$name/usr/local/go"
	fi
	rm -rf "$work/$name/var/cache/apt/archives"/*.deb "$work/$name/var/lib/apt/lists"/*
	tar -C "$work/$name" -c . | podman import --change 'ENV PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "hexserve-base/$name" >/dev/null
	rm -rf "${work:?}/$name"
}
base runtime ca-certificates
base build ca-certificates,gcc,make,libc6-dev

echo "test-docker: podman build"
podman build -q -f Dockerfile.hostsim -t "$IMAGE" \
	--build-arg BUILD_BASE=localhost/hexserve-base/build --build-arg RUNTIME_BASE=localhost/hexserve-base/runtime \
	--build-arg GOPROXY=off -v "$(go env GOMODCACHE):/root/go/pkg/mod:ro" . >/dev/null

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cid=$(podman run -d -p "127.0.0.1:$port:8080" "$IMAGE")
url="http://127.0.0.1:$port"
for _ in $(seq 1 300); do
	[[ $(curl -s -o /dev/null -w '%{http_code}' "$url/health" || true) == 200 ]] && break
	sleep 0.2
done
check() { # name, expected substring, curl args...
	local name=$1 want=$2 out
	shift 2
	out=$(curl -sS --max-time 30 "$@")
	if [[ $out != *"$want"* ]]; then
		echo "test-docker: $name: got $out" >&2
		podman logs "$cid" >&2 || true
		exit 1
	fi
	echo "test-docker: $name ok"
}
check /health '"status"' "$url/health"
check /v1/models '"object":"list"' "$url/v1/models"
model=$(curl -s "$url/v1/models" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p' | head -n1)
check "chat completion" '"finish_reason"' "$url/v1/chat/completions" -H 'Content-Type: application/json' \
	-d "{\"model\":\"$model\",\"messages\":[{\"role\":\"user\",\"content\":\"Say hello\"}],\"max_tokens\":8,\"temperature\":0}"
echo "test-docker: passed"
