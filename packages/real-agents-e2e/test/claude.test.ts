import { claude } from "../src/profiles.js";
import { realAgentSuite } from "../src/suite.js";

realAgentSuite(claude);
