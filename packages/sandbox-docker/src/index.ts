/** `dockerSandbox()`: sandboxes in containers of any Docker-Engine-API engine (Docker, Podman). */
export {
  dockerSandbox,
  type DockerPersistentProvider,
  type DockerSandboxInstance,
  type DockerSandboxProvider,
} from "./provider.js";
export type { DockerMount, DockerSandboxOptions, ServerAddress } from "./options.js";
export { DockerSandboxError, type DockerSandboxErrorCode } from "./errors.js";
