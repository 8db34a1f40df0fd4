import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, describe, it } from "node:test";
import { DockerSandboxError, type DockerSandboxInstance } from "../src/index.js";
import {
  docker,
  engineSkip,
  RUN_ID,
  runContainers,
  runIn,
  testFleetProvider,
  testOptions,
  testProvider,
  waitNoContainers,
} from "./helpers.js";
import { waitFor } from "@sandbox-agent/testkit";

const provider = testFleetProvider();
const health = (instance: DockerSandboxInstance, token = instance.server.token) =>
  fetch(`${instance.endpoint}/v2/health`, { headers: { authorization: `Bearer ${token}` } }).then(
    (r) => r.status,
  );
const running = async (id: string) => (await docker.getContainer(id).inspect()).State.Running;

describe(
  "dockerSandbox({ persistent: true }): sandboxes by id for a fleet",
  { skip: engineSkip, timeout: 180_000 },
  () => {
    after(() => waitNoContainers());

    it("create refuses a second container; handles leave it running; stop, resume with a fresh token, destroy", async () => {
      const id = `fleet-${RUN_ID}`;
      const created = await provider.create({ id, env: {} });
      try {
        assert.equal(created.providerId, created.containerId);
        assert.match(created.endpoint ?? "", /^http:\/\/127\.0\.0\.1:\d+$/);
        assert.equal(created.bootstrapped, undefined, "a new sandbox is bootstrapped by its caller");
        await created.files.writeFile("kept.txt", "from the first handle");
        await assert.rejects(
          provider.create({ id, env: {} }),
          (error: DockerSandboxError) =>
            error.code === "exists" && /resume it, or destroy it first/.test(error.message),
        );
        assert.equal((await runContainers(`dev.sandboxagent.key=${id}`)).length, 1, "no second container");
        await created.dispose();
        assert.equal(
          await running(created.containerId),
          true,
          "disposing a handle leaves the container running",
        );

        const again = await provider.resume({ id, env: { GREETING: "hello" } });
        assert.ok(again);
        assert.equal(again.containerId, created.containerId);
        assert.equal(
          again.server.token,
          created.server.token,
          "the running server's token, read through the engine",
        );
        assert.equal(again.bootstrapped, false, "its bootstrap never finished");
        assert.equal(
          (await runIn(again, 'cat kept.txt; echo " $GREETING"')).stdout,
          "from the first handle hello\n",
        );
        await again.markBootstrapped!();

        await provider.stop(id);
        assert.equal(await running(created.containerId), false);
        await provider.stop(id); // stopped already: no error
        const restarted = await provider.resume({ id, env: {} });
        assert.ok(restarted);
        assert.equal(restarted.bootstrapped, true);
        assert.notEqual(restarted.server.token, created.server.token, "a fresh token for the new start");
        assert.equal(await health(restarted), 200);
        assert.equal(await health(restarted, created.server.token), 401, "the old token no longer works");
        assert.equal((await runIn(restarted, "cat kept.txt")).stdout, "from the first handle");
      } finally {
        await provider.destroy(id);
      }
      assert.equal((await runContainers(`dev.sandboxagent.key=${id}`)).length, 0);
      assert.equal(await provider.resume({ id, env: {} }), undefined);
      await provider.stop(id);
      await provider.destroy(id);
    });

    it("the process that created it exits: the container keeps running for the other replicas", async () => {
      const id = `fleet-exit-${RUN_ID}`;
      const keyed = `keyed-exit-${RUN_ID}`;
      // A fleet's sandbox and a keyed one; the process's exit clean-up stops the keyed one (one helper
      // handles every tracked container), and must leave the fleet's alone.
      const script = `
      const { dockerSandbox } = await import(${JSON.stringify(new URL("../src/index.js", import.meta.url).href)});
      const [options, id, key] = JSON.parse(process.argv[1]);
      await dockerSandbox({ ...options, persistent: true }).create({ id, env: {} });
      await dockerSandbox({ ...options, key }).create({ id: key, env: {} });
      process.stdout.write("created");
      process.kill(process.pid, "SIGTERM");`;
      const child = spawn(process.execPath, [
        "--input-type=module",
        "-e",
        script,
        JSON.stringify([testOptions(), id, keyed]),
      ]);
      let out = "";
      child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
      await new Promise((resolve) => child.once("exit", resolve));
      assert.equal(out, "created");
      try {
        const [fleets] = await runContainers(`dev.sandboxagent.key=${id}`);
        const [stopped] = await runContainers(`dev.sandboxagent.key=${keyed}`);
        assert.ok(fleets && stopped);
        await waitFor(
          async () => !(await running(stopped.Id)),
          30_000,
          "the exit clean-up to stop the keyed one",
        );
        assert.equal(await running(fleets.Id), true);
      } finally {
        await provider.destroy(id);
        await testProvider().destroy(keyed);
      }
    });

    it("refuses an id that is not a container label value, and a key together with persistent", () => {
      assert.throws(() => testFleetProvider({ key: "k" }), /give key or persistent, not both/);
      return assert.rejects(provider.create({ id: "no spaces", env: {} }), /invalid key "no spaces"/);
    });
  },
);
