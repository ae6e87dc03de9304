/**
 * Validates Kubernetes objects offline against the API's published OpenAPI schema, the way an API
 * server with strict field validation (`kubectl apply --validate=strict`) does:
 *
 * - kubernetes-models: the official OpenAPI definitions compiled to ajv validators, one model per
 *   group/version/kind. Catches wrong types (`replicas: "2"`), missing required fields and bad
 *   formats.
 * - Unknown fields: the OpenAPI definitions leave `additionalProperties` open, so a misspelt
 *   optional field (`livenesProbe`) passes ajv. The field lists of @kubernetes/client-node's
 *   models (generated from the same OpenAPI document, with each field's JSON name) catch those.
 */
import * as k8s from '@kubernetes/client-node';
import { messageOf } from '../../src/ports/errors.js';

// biome-ignore lint/suspicious/noExplicitAny: Kubernetes objects are untyped YAML here
type Obj = any;

interface AttributeType {
  baseName: string;
  type: string;
}
type ModelClass = { getAttributeTypeMap(): AttributeType[] };

const models = k8s as unknown as Record<string, ModelClass | undefined>;

/** The client-node model of a top-level kind, e.g. `apps/v1` Deployment → V1Deployment. */
function modelName(apiVersion: string, kind: string): string {
  const version = apiVersion.split('/').at(-1) as string;
  return `${version[0]?.toUpperCase()}${version.slice(1)}${kind}`;
}

/** Reports every field that the model of `type` does not have, as `path: unknown field "x"`. */
function unknownFields(value: Obj, type: string, path: string, errors: string[]): void {
  if (value === null || value === undefined) return;
  const array = /^Array<(.+)>$/.exec(type);
  if (array) {
    if (Array.isArray(value))
      for (const [i, v] of value.entries()) unknownFields(v, array[1] as string, `${path}/${i}`, errors);
    return;
  }
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map) {
    if (typeof value === 'object')
      for (const [k, v] of Object.entries(value)) unknownFields(v, map[1] as string, `${path}/${k}`, errors);
    return;
  }
  const model = models[type];
  if (typeof model?.getAttributeTypeMap !== 'function' || typeof value !== 'object' || Array.isArray(value))
    return; // a primitive, IntOrString, any: the type check is ajv's
  const fields = new Map(model.getAttributeTypeMap().map((a) => [a.baseName, a.type]));
  for (const [key, v] of Object.entries(value)) {
    const fieldType = fields.get(key);
    if (fieldType === undefined) errors.push(`${path}: unknown field "${key}" in ${type}`);
    else unknownFields(v, fieldType, `${path}/${key}`, errors);
  }
}

/**
 * Validates one object; resolves to the list of problems (empty when valid), each naming the path.
 * An apiVersion/kind without a published schema is a problem too.
 */
export async function validateObject(obj: Obj): Promise<string[]> {
  const { apiVersion, kind } = obj ?? {};
  if (typeof apiVersion !== 'string' || typeof kind !== 'string') return ['missing apiVersion or kind'];
  let mod: Record<string, (new (data: Obj) => { validate(): void }) | undefined>;
  try {
    const specifier = `kubernetes-models/${apiVersion}`;
    mod = await import(/* @vite-ignore */ specifier);
  } catch {
    return [`no schema for apiVersion ${apiVersion}`];
  }
  const Model = mod[kind];
  if (typeof Model !== 'function') return [`no schema for ${apiVersion} ${kind}`];
  const errors: string[] = [];
  try {
    new Model(obj).validate();
  } catch (err) {
    errors.push(messageOf(err));
  }
  const name = modelName(apiVersion, kind);
  if (typeof models[name]?.getAttributeTypeMap !== 'function') errors.push(`no field list for ${name}`);
  else unknownFields(obj, name, '', errors);
  return errors;
}
