/** `dockerSandbox()`: sandboxes in containers of any Docker-Engine-API engine (Docker, Podman). */
export {
  dockerSandbox,
  type DockerPersistentProvider,
  type DockerSandboxInstance,
  type DockerSandboxProvider,
} from "./provider.js";
export type { DockerMount, DockerSandboxOptions } from "./options.js";
export { DockerSandboxError, type DockerSandboxErrorCode } from "./errors.js";
export type { ServerAddress } from "./container.js";
