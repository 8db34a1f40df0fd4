import assert from "node:assert/strict";
import type { IncomingMessage } from "node:http";
import { describe, it } from "node:test";
import { ProblemError } from "../src/http/problem.js";
import { requestPath, requestUrl } from "../src/http/router.js";

const request = (url: string) => ({ url }) as IncomingMessage;

describe("requestPath", () => {
  it("is the URL parser's path for every target, the plain ones taken as they are", () => {
    const targets = [
      "/",
      "/v2/rpc",
      "/v2/processes/abc-1_2/terminal",
      "/v2/rpc/",
      "/a//b",
      "//evil.example/v2/rpc",
      "///v2/rpc",
      "/v2/./rpc",
      "/v2/../v2/rpc",
      "/v2/rpc?x=1",
      "/v2/rpc#frag",
      "/v2/agents/%41",
      "/v2/agents/a b",
      "/v2\\rpc",
      "/ü",
      "/v2/rpc%2F..",
      "*",
      "http://localhost/v2/rpc",
    ];
    for (const target of targets)
      assert.equal(requestPath(request(target)), requestUrl(request(target)).pathname, target);
  });

  it("refuses what the URL parser refuses, with a 400", () => {
    assert.throws(
      () => requestPath(request("http://[::1")),
      (error) => error instanceof ProblemError && error.problem.status === 400,
    );
  });
});
