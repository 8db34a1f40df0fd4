/** Conversion of sandbox metadata in and out of `_meta["sandboxagent.dev"]`. */
import type { SessionMetadata } from "./types.js";

export const META_KEY = "sandboxagent.dev";

export type Meta = Record<string, unknown>;

export function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** `_meta` carrying `metadata` in the sandbox namespace, or undefined when there is none. */
export function metaFor(metadata: SessionMetadata | undefined): Meta | undefined {
  return metadata && Object.keys(metadata).length > 0 ? { [META_KEY]: { ...metadata } } : undefined;
}

/** The sandbox metadata carried by a message's `_meta` (empty when absent). */
export function metadataOf(value: unknown): SessionMetadata {
  if (!isRecord(value) || !isRecord(value._meta)) return {};
  const ours = value._meta[META_KEY];
  return isRecord(ours) ? { ...ours } : {};
}

export function stringField(record: Record<string, unknown>, key: string): string | undefined {
  const value = record[key];
  return typeof value === "string" ? value : undefined;
}
