#!/usr/bin/env bash
# Builds a local base image for the container sandbox, without any image registry: a minimal
# Debian rootfs from Debian's own packages (mmdebstrap: a shell, coreutils, git, CA certificates),
# plus this machine's `node` binary, imported into the engine with `podman import` (or
# `docker import`). It holds no sandbox-agent code: the provider injects the server, as it does
# into any image such as node:22.
#
#   build-test-image.sh [--tag TAG] [--force]     (root, or a user mmdebstrap can run for)
#
# Cached: the image carries a label with a hash of its inputs (this script, the Debian suite and
# packages, the node binary); when an image with the same hash exists, nothing is rebuilt.
# Environment: SANDBOX_AGENT_TEST_IMAGE (default tag), SANDBOX_AGENT_DEBIAN_MIRROR, CONTAINER_CLI.
set -euo pipefail

TAG="${SANDBOX_AGENT_TEST_IMAGE:-localhost/sandbox-agent-test:latest}"
FORCE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) TAG="$2"; shift 2 ;;
    --force) FORCE=1; shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-test-image: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

SUITE=bookworm
PACKAGES=git,ca-certificates,procps
CLI="${CONTAINER_CLI:-$(command -v podman || command -v docker || true)}"
if [ -z "$CLI" ]; then
  echo "build-test-image: neither podman nor docker is installed" >&2
  exit 1
fi
for tool in mmdebstrap node sha256sum; do
  command -v "$tool" >/dev/null || { echo "build-test-image: $tool is missing (apt-get install $tool)" >&2; exit 1; }
done
NODE="$(readlink -f "$(command -v node)")"
if ! ldd "$NODE" >/dev/null 2>&1; then
  echo "build-test-image: $NODE is not a dynamically linked Linux binary this script can copy" >&2
  exit 1
fi

INPUTS="$( { cat "$0"; echo "$SUITE $PACKAGES ${SANDBOX_AGENT_DEBIAN_MIRROR:-}"; sha256sum "$NODE"; } | sha256sum | cut -c1-16)"
if [ "$FORCE" = 0 ]; then
  have="$("$CLI" image inspect --format '{{ index .Config.Labels "dev.sandboxagent.image-inputs" }}' "$TAG" 2>/dev/null || true)"
  if [ "$have" = "$INPUTS" ]; then
    echo "build-test-image: $TAG is up to date ($INPUTS)"
    exit 0
  fi
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/sandbox-agent-image.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
started=$SECONDS
echo "build-test-image: debootstrapping $SUITE ($PACKAGES) with mmdebstrap..." >&2
mmdebstrap --quiet --variant=minbase --include="$PACKAGES" \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
  "$SUITE" "$WORK/rootfs" ${SANDBOX_AGENT_DEBIAN_MIRROR:+"$SANDBOX_AGENT_DEBIAN_MIRROR"}
echo "build-test-image: adding node $("$NODE" --version) from $NODE" >&2
install -m 0755 "$NODE" "$WORK/rootfs/usr/local/bin/node"
# Libraries node needs that the minimal Debian may lack (same paths as on this machine).
ldd "$NODE" | awk '/=> \// { print $3 }' | while read -r lib; do
  [ -e "$WORK/rootfs$lib" ] || install -D -m 0644 "$lib" "$WORK/rootfs$lib"
done
chroot "$WORK/rootfs" /usr/local/bin/node --version >/dev/null

echo "build-test-image: importing as $TAG" >&2
tar -C "$WORK/rootfs" -c . | "$CLI" import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'WORKDIR /' \
  --change 'CMD ["node"]' \
  --change "LABEL dev.sandboxagent.image-inputs=$INPUTS" \
  - "$TAG" >/dev/null
echo "build-test-image: built $TAG ($INPUTS) in $((SECONDS - started)) s, $("$CLI" image inspect --format '{{ .Size }}' "$TAG") bytes"
