import { opencode } from "../src/profiles.js";
import { realAgentSuite } from "../src/suite.js";

realAgentSuite(opencode);
