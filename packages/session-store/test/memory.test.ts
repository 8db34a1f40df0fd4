import { sessionStoreConformance } from "../src/conformance.js";
import { memorySessionStore } from "../src/index.js";

sessionStoreConformance("memory", async () => memorySessionStore());
