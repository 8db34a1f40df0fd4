# Sourced by .ci/run (bash): a real container engine for the sandbox tests, from Debian's packages.
# Installs what is missing (Podman with runc and slirp4netns, gVisor's runsc, bubblewrap,
# mmdebstrap for the test image), writes a containers config of our own (runc, not crun, which
# fails on cgroup setups like CI's; nofile/nproc limits root may set there), starts Podman's
# Docker-compatible API on a private socket and exports DOCKER_HOST for the tests. Podman's API
# ignores a container's requested runtime (HostConfig.Runtime), so gVisor gets a second service
# whose default runtime is runsc (with host networking, the only mode runsc runs in under Podman
# here), exported as SANDBOX_AGENT_GVISOR_DOCKER_HOST. Everything it started is stopped by
# `container_engine_stop` (.ci/run traps EXIT).

container_engine_install() {
  local missing=()
  command -v podman >/dev/null || missing+=(podman)
  command -v runc >/dev/null || [ -x /usr/sbin/runc ] || missing+=(runc)
  command -v slirp4netns >/dev/null || missing+=(slirp4netns)
  command -v conmon >/dev/null || [ -x /usr/bin/conmon ] || missing+=(conmon)
  [ -x /usr/libexec/podman/catatonit ] || command -v catatonit >/dev/null || missing+=(catatonit)
  command -v runsc >/dev/null || missing+=(runsc)
  command -v bwrap >/dev/null || missing+=(bubblewrap)
  command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
  command -v git >/dev/null || missing+=(git)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "container engine: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

# podman_service NAME RUNTIME: writes NAME.conf, starts the service on NAME.sock, waits for it.
podman_service() {
  local name="$1" runtime="$2"
  cat >"$ENGINE_DIR/$name.conf" <<CONF
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]

[engine]
runtime = "$runtime"

[engine.runtimes]
runc = ["$(command -v runc || echo /usr/sbin/runc)"]
runsc = ["$ENGINE_DIR/runsc"]
CONF
  CONTAINERS_CONF="$ENGINE_DIR/$name.conf" \
    podman system service --time=0 "unix://$ENGINE_DIR/$name.sock" >"$ENGINE_DIR/$name.log" 2>&1 &
  ENGINE_PIDS+=($!)
  local waited=0
  until node -e 'require("http").get({socketPath: process.argv[1], path: "/_ping"}, (r) => process.exit(r.statusCode === 200 ? 0 : 1)).on("error", () => process.exit(1))' "$ENGINE_DIR/$name.sock"; do
    if ! kill -0 "${ENGINE_PIDS[-1]}" 2>/dev/null || [ $waited -ge 300 ]; then
      echo "container engine: podman system service ($name) did not start:" >&2
      cat "$ENGINE_DIR/$name.log" >&2
      return 1
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
}

container_engine_start() {
  ENGINE_DIR="$(mktemp -d "${TMPDIR:-/tmp}/sandbox-agent-engine.XXXXXX")"
  ENGINE_PIDS=()
  cat >"$ENGINE_DIR/runsc" <<RUNSC
#!/bin/sh
exec $(command -v runsc) --network=host "\$@"
RUNSC
  chmod +x "$ENGINE_DIR/runsc"
  podman_service engine runc
  podman_service gvisor runsc
  # The podman CLI (test image build) uses the same configuration as the main service.
  export CONTAINERS_CONF="$ENGINE_DIR/engine.conf"
  export DOCKER_HOST="unix://$ENGINE_DIR/engine.sock"
  export SANDBOX_AGENT_GVISOR_DOCKER_HOST="unix://$ENGINE_DIR/gvisor.sock"
  echo "container engine: podman $(podman --version | awk '{print $3}') at $DOCKER_HOST (gVisor: $SANDBOX_AGENT_GVISOR_DOCKER_HOST)" >&2
}

container_engine_stop() {
  local pid
  for pid in ${ENGINE_PIDS[@]+"${ENGINE_PIDS[@]}"}; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  [ -n "${ENGINE_DIR:-}" ] && rm -rf "$ENGINE_DIR"
}
