/**
 * Helpers of the distribution checks: read the code blocks of a README, run commands with a
 * time limit. The checks themselves are this package's tests.
 */
export { codeBlocks, type BlockMode, type CodeBlock } from "./markdown.js";
export { mustRun, runCommand, type CommandOptions, type CommandResult } from "./command.js";
export { typeCheckAndEmit, type TypeCheckResult } from "./typecheck.js";
