import { randomBytes } from "node:crypto";
import Docker from "dockerode";
import { needService, readText, waitFor } from "@sandbox-agent/testkit";
import type { SandboxInstance, SandboxProcess } from "@sandbox-agent/ai-sandbox";
import {
  dockerSandbox,
  type DockerPersistentProvider,
  type DockerSandboxOptions,
  type DockerSandboxProvider,
} from "../src/index.js";

/** Built by `npm run image -w @sandbox-agent/sandbox-docker` (.ci/run does it). */
export const TEST_IMAGE = process.env.SANDBOX_AGENT_TEST_IMAGE ?? "localhost/sandbox-agent-test:latest";
/**
 * Host networking by default: the server binds 127.0.0.1 on this machine, and a git server the
 * test runs on 127.0.0.1 is reachable from inside. `SANDBOX_AGENT_TEST_NETWORK` overrides it.
 */
export const TEST_NETWORK = process.env.SANDBOX_AGENT_TEST_NETWORK ?? "host";
/** Every container a test run makes carries this label, so the run can prove it left none. */
export const RUN_LABEL = "dev.sandboxagent.test-run";
export const RUN_ID = `${process.pid}-${randomBytes(3).toString("hex")}`;

export const docker = new Docker(
  process.env.DOCKER_HOST?.startsWith("unix://")
    ? { socketPath: process.env.DOCKER_HOST.slice("unix://".length) }
    : undefined,
);

async function engineMissing(): Promise<string | undefined> {
  try {
    await docker.ping();
  } catch (error) {
    return (
      `no engine at ${process.env.DOCKER_HOST ?? "/var/run/docker.sock"} (${(error as Error).message}); ` +
      "start one (`podman system service --time=0 unix:///run/podman/podman.sock`, then " +
      "DOCKER_HOST=unix:///run/podman/podman.sock), as .ci/run does"
    );
  }
  try {
    await docker.getImage(TEST_IMAGE).inspect();
  } catch {
    return `the test image ${TEST_IMAGE} is missing: npm run image -w @sandbox-agent/sandbox-docker`;
  }
  return undefined;
}

/** `describe(..., { skip })` gate: skips under plain `npm test` without an engine, fails under .ci/run. */
export const engineSkip = needService("container engine", await engineMissing());

/**
 * The engine for gVisor tests: `SANDBOX_AGENT_GVISOR_DOCKER_HOST` (.ci/run starts a Podman service
 * whose default runtime is runsc: Podman's API ignores a per-container runtime), else the main one.
 */
export const GVISOR_HOST = process.env.SANDBOX_AGENT_GVISOR_DOCKER_HOST ?? process.env.DOCKER_HOST;

/** Why gVisor tests cannot run here, or undefined. */
export async function gvisorMissing(): Promise<string | undefined> {
  if (engineSkip) return "no container engine";
  if (GVISOR_HOST === undefined) return "no engine address";
  const engine = new Docker({ socketPath: GVISOR_HOST.replace(/^unix:\/\//, "") });
  const info = (await engine.info().catch(() => ({}))) as { Runtimes?: Record<string, unknown> };
  return info.Runtimes?.["runsc"] === undefined
    ? `the engine at ${GVISOR_HOST} has no runsc runtime (apt-get install runsc; .ci/container-engine.sh sets it up)`
    : undefined;
}

/** The options every test sandbox shares: the test image, its network, this run's label. */
export function testOptions(extra: Partial<DockerSandboxOptions> = {}): DockerSandboxOptions {
  return {
    image: TEST_IMAGE,
    network: TEST_NETWORK,
    pull: "never",
    ...extra,
    labels: { [RUN_LABEL]: RUN_ID, ...extra.labels },
  };
}

export function testProvider(extra: Partial<DockerSandboxOptions> = {}): DockerSandboxProvider {
  return dockerSandbox(testOptions(extra));
}

/** A fleet's provider (`persistent: true`) with the test options. */
export function testFleetProvider(extra: Partial<DockerSandboxOptions> = {}): DockerPersistentProvider {
  return dockerSandbox({ ...testOptions(extra), persistent: true });
}

/** Containers of this test run (any state). */
export async function runContainers(label = `${RUN_LABEL}=${RUN_ID}`): Promise<Docker.ContainerInfo[]> {
  return docker.listContainers({ all: true, filters: JSON.stringify({ label: [label] }) });
}

export async function waitNoContainers(label?: string, timeoutMs = 30_000): Promise<void> {
  await waitFor(async () => (await runContainers(label)).length === 0, timeoutMs, "no container left");
}

export { readText };

/** Runs `command` in the sandbox with stdin closed; its stdout, stderr tail and exit. */
export async function runIn(
  sandbox: Pick<SandboxInstance, "spawn">,
  command: string,
  env?: Record<string, string>,
): Promise<{ stdout: string; stderr: string; code: number | null; proc: SandboxProcess }> {
  const proc = await sandbox.spawn(command, env === undefined ? {} : { env });
  await proc.stdin.close();
  const [stdout, exit] = await Promise.all([readText(proc.stdout), proc.exited]);
  return { stdout, stderr: proc.stderrTail(), code: exit.code, proc };
}

/** The container of a sandbox definition id (this run's). */
export async function containerOf(sandboxId: string): Promise<Docker.Container> {
  const [found] = await docker.listContainers({
    all: true,
    filters: JSON.stringify({ label: [`${RUN_LABEL}=${RUN_ID}`, `dev.sandboxagent.sandbox=${sandboxId}`] }),
  });
  if (found === undefined) throw new Error(`no container for sandbox ${sandboxId}`);
  return docker.getContainer(found.Id);
}
