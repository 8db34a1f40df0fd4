import { inspect } from "node:util";

const REDACTED = "[redacted]";
const VALUES = new WeakMap<Secrets, ReadonlyMap<string, string>>();
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** A reference to one secret, resolved to its value only when a process or MCP config is built. */
export interface SecretRef {
  readonly kind: "secret-ref";
  readonly name: string;
}

/**
 * Named secret values. They reach agent processes only through their environment
 * (`SandboxInstance.env`) and resolved MCP headers; the values are held in a module-private
 * map, so `toString`, `JSON.stringify` and `util.inspect` show names only.
 */
export class Secrets {
  readonly names: readonly string[];

  constructor(values: Readonly<Record<string, string>>) {
    const entries = Object.entries(values);
    for (const [name, value] of entries) {
      if (!ENV_NAME.test(name))
        throw new TypeError(`createSecrets: "${name}" is not a valid environment variable name`);
      if (typeof value !== "string")
        throw new TypeError(`createSecrets: value of "${name}" must be a string`);
    }
    VALUES.set(this, new Map(entries));
    this.names = Object.freeze(entries.map(([name]) => name));
  }

  /** A reference usable in `mcpSkill` headers/env and `bearer`. */
  ref(name: string): SecretRef {
    if (!this.names.includes(name)) throw new Error(`Secrets: no secret named "${name}"`);
    return { kind: "secret-ref", name };
  }

  toString(): string {
    return `Secrets(${this.names.map((name) => `${name}=${REDACTED}`).join(", ")})`;
  }

  toJSON(): Record<string, string> {
    return Object.fromEntries(this.names.map((name) => [name, REDACTED]));
  }

  [inspect.custom](): string {
    return this.toString();
  }
}

export function createSecrets(values: Readonly<Record<string, string>>): Secrets {
  return new Secrets(values);
}

/** @internal The plaintext values; used by the sandbox layer when building agent env. */
export function revealSecrets(secrets: Secrets | undefined): Record<string, string> {
  if (secrets === undefined) return {};
  return Object.fromEntries(VALUES.get(secrets) ?? []);
}

/** @internal Resolve a string-or-ref against the workspace secrets. */
export function resolveSecretValue(value: string | SecretRef, secrets: Secrets | undefined): string {
  if (typeof value === "string") return value;
  const resolved = revealSecrets(secrets)[value.name];
  if (resolved === undefined)
    throw new Error(`secret "${value.name}" is not declared in the workspace secrets`);
  return resolved;
}
