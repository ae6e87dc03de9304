/**
 * Node state on the state disk: the role and measurement salt the bootstrapper
 * persists after joining or initialising, read back by the disk-mapper on reboot. Format is upstream's
 * Go JSON, tab-indented: `{"Role": "ControlPlane", "MeasurementSalt": "<std base64>"}`. Written once,
 * exclusively, through a {@link FileWriter}.
 */
import { readFile } from 'node:fs/promises';
import { ConfbootError, wrapError } from '../../ports/errors.js';
import type { FileWriter } from '../../ports/file-writer.js';
import type { NodeStateStore } from '../../ports/node-state-store.js';
import type { NodeState, Role } from '../../ports/types.js';
import { ExclusiveFileWriter } from './exclusive-file-writer.js';

/** Upstream's node state path. */
export const DEFAULT_NODE_STATE_PATH = '/run/state/constellation/node_state.json';

/** Options for {@link JsonNodeStateStore}. */
export interface JsonNodeStateStoreOptions {
  /** Default {@link DEFAULT_NODE_STATE_PATH}. */
  path?: string;
  /** Default a new {@link ExclusiveFileWriter}. */
  fileWriter?: FileWriter;
}

/** Parses a role as upstream's `role.UnmarshalJSON`: case-insensitive, anything unknown is `Unknown`. */
export function parseRole(value: string): Role {
  switch (value.toLowerCase()) {
    case 'controlplane':
    case 'control-plane':
      return 'ControlPlane';
    case 'worker':
      return 'Worker';
    default:
      return 'Unknown';
  }
}

/** Serialises node state exactly as Go's `json.MarshalIndent(state, "", "\t")` does. */
export function encodeNodeState(state: NodeState): Uint8Array {
  const json = JSON.stringify(
    { Role: state.role, MeasurementSalt: Buffer.from(state.measurementSalt).toString('base64') },
    null,
    '\t',
  );
  return new TextEncoder().encode(json);
}

/** Parses node state JSON; throws `invalid-argument` naming what is wrong. */
export function decodeNodeState(text: string): NodeState {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (err) {
    throw new ConfbootError('invalid-argument', `node state is not JSON: ${(err as Error).message}`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    throw new ConfbootError('invalid-argument', 'node state is not a JSON object');
  }
  const obj = v as Record<string, unknown>;
  // Go's encoding/json matches field names case-insensitively.
  const get = (name: string) => {
    const key = Object.keys(obj).find((k) => k.toLowerCase() === name.toLowerCase());
    return key === undefined ? undefined : obj[key];
  };
  const role = get('Role');
  if (role !== undefined && role !== null && typeof role !== 'string') {
    throw new ConfbootError('invalid-argument', 'node state Role is not a string');
  }
  const salt = get('MeasurementSalt');
  let measurementSalt = new Uint8Array(0);
  if (salt !== undefined && salt !== null) {
    if (typeof salt !== 'string' || salt.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(salt)) {
      throw new ConfbootError('invalid-argument', 'node state MeasurementSalt is not standard base64');
    }
    measurementSalt = new Uint8Array(Buffer.from(salt, 'base64'));
  }
  return { role: typeof role === 'string' ? parseRole(role) : 'Unknown', measurementSalt };
}

/** {@link NodeStateStore} as upstream's node_state.json. */
export class JsonNodeStateStore implements NodeStateStore {
  /** Where the state lives. */
  readonly path: string;
  private readonly fileWriter: FileWriter;

  constructor(options: JsonNodeStateStoreOptions = {}) {
    this.path = options.path ?? DEFAULT_NODE_STATE_PATH;
    this.fileWriter = options.fileWriter ?? new ExclusiveFileWriter();
  }

  /** Writes the state once; an existing file is an error ("file exists already"). */
  async write(state: NodeState): Promise<void> {
    try {
      await this.fileWriter.writeExclusive(this.path, encodeNodeState(state));
    } catch (err) {
      throw wrapError('writing node state', err);
    }
  }

  /** Reads the state, or undefined when the file does not exist. */
  async read(): Promise<NodeState | undefined> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw wrapError(`reading node state ${this.path}`, err);
    }
    try {
      return decodeNodeState(text);
    } catch (err) {
      throw wrapError(`reading node state ${this.path}`, err);
    }
  }
}
