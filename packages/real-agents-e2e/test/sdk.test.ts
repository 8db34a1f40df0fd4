import { claude, codex, pi } from "../src/profiles.js";
import { sdkSuite } from "../src/sdk-suite.js";

// The agents the issue names first; the transport-level suites cover every installed agent in depth.
for (const profile of [claude, codex, pi]) sdkSuite(profile);
