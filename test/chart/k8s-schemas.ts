/**
 * Local JSON schemas for kubeconform, which otherwise downloads them from a host that is
 * not reachable here. Two sources, both real:
 *  - core objects: the Kubernetes OpenAPI v2 spec (api/openapi-spec/swagger.json of the
 *    k8s.io/kubernetes module on the Go proxy, fetched by .ci/install-chart-tools.sh);
 *  - custom resources (KEDA, prometheus-operator): the openAPIV3Schema of the CRDs vendored
 *    in test/chart/crds.
 * Each kind becomes one self-contained draft-07 schema named the way kubeconform's
 * `{{ .ResourceKind }}{{ .KindSuffix }}.json` template expects (deployment-apps-v1.json).
 * "Strict" as kubeconform's own strict schemas are: every object that lists its properties
 * rejects any other (additionalProperties: false) unless the spec says it keeps unknown fields.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

const isObject = (v: Json | undefined): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

/** kubeconform's file name for a kind: lower-case kind, first label of the group, version. */
export function schemaFileName(group: string, version: string, kind: string): string {
  const groupPart = group ? `-${group.split('.')[0]!.toLowerCase()}` : '';
  return `${kind.toLowerCase()}${groupPart}-${version.toLowerCase()}.json`;
}

const INT_OR_STRING: JsonObject = { oneOf: [{ type: 'string' }, { type: 'integer' }] };
// resource.Quantity is `type: string` in the spec, but `cpu: 1` is a valid manifest.
const QUANTITY: JsonObject = { oneOf: [{ type: 'string' }, { type: 'number' }] };
const QUANTITY_REF = 'io.k8s.apimachinery.pkg.api.resource.Quantity';

/** Keywords kept from the specs; the rest (descriptions, x-kubernetes-* hints, CEL) are dropped. */
const KEPT = new Set([
  'type', 'enum', 'required', 'items', 'properties', 'additionalProperties', 'minimum', 'maximum',
  'minLength', 'maxLength', 'minItems', 'maxItems', 'pattern', 'oneOf', 'anyOf', 'allOf', 'not', 'default',
]);

function strictify(node: Json, refs: Set<string>): Json {
  if (!isObject(node)) return node;
  if (typeof node.$ref === 'string') {
    const name = node.$ref.replace('#/definitions/', '');
    refs.add(name);
    return { $ref: `#/definitions/${name}` };
  }
  if (node.format === 'int-or-string' || node['x-kubernetes-int-or-string'] === true) return INT_OR_STRING;
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(node)) {
    if (!KEPT.has(key)) continue;
    if (key === 'properties' && isObject(value)) {
      out.properties = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, strictify(v, refs)]));
    } else if (key === 'items' || key === 'additionalProperties' || key === 'not') {
      out[key] = strictify(value, refs);
    } else if ((key === 'oneOf' || key === 'anyOf' || key === 'allOf') && Array.isArray(value)) {
      out[key] = value.map((v) => strictify(v, refs));
    } else {
      out[key] = value;
    }
  }
  if (out.properties !== undefined && out.additionalProperties === undefined && node['x-kubernetes-preserve-unknown-fields'] !== true) {
    out.additionalProperties = false;
  }
  return out;
}

interface GroupVersionKind {
  group: string;
  version: string;
  kind: string;
}

/** One schema per kind of the OpenAPI v2 spec, with the definitions it reaches. */
export function coreSchemas(swagger: { definitions: Record<string, JsonObject> }): Map<string, JsonObject> {
  const converted = new Map<string, { schema: Json; refs: Set<string> }>();
  const convert = (name: string) => {
    let hit = converted.get(name);
    if (!hit) {
      const refs = new Set<string>();
      const source = swagger.definitions[name];
      if (!source) throw new Error(`swagger.json: $ref to a missing definition ${name}`);
      hit = { schema: name === QUANTITY_REF ? QUANTITY : strictify(source, refs), refs };
      converted.set(name, hit);
    }
    return hit;
  };
  const out = new Map<string, JsonObject>();
  for (const [name, definition] of Object.entries(swagger.definitions)) {
    const gvks = definition['x-kubernetes-group-version-kind'];
    if (!Array.isArray(gvks) || gvks.length !== 1) continue; // meta types (DeleteOptions, WatchEvent) list many
    const gvk = gvks[0] as unknown as GroupVersionKind;
    const definitions: JsonObject = {};
    const pending = [...convert(name).refs];
    while (pending.length > 0) {
      const ref = pending.pop()!;
      if (ref in definitions) continue;
      const hit = convert(ref);
      definitions[ref] = hit.schema;
      pending.push(...hit.refs);
    }
    const root = convert(name).schema as JsonObject;
    out.set(schemaFileName(gvk.group, gvk.version, gvk.kind), {
      $schema: 'http://json-schema.org/draft-07/schema#',
      ...root,
      definitions,
    });
  }
  return out;
}

/** One schema per served version of each CustomResourceDefinition. */
export function crdSchemas(crds: readonly JsonObject[]): Map<string, JsonObject> {
  const out = new Map<string, JsonObject>();
  for (const crd of crds) {
    if (crd.kind !== 'CustomResourceDefinition' || !isObject(crd.spec)) continue;
    const { group, names, versions } = crd.spec;
    if (typeof group !== 'string' || !isObject(names) || typeof names.kind !== 'string' || !Array.isArray(versions)) continue;
    for (const version of versions) {
      if (!isObject(version) || typeof version.name !== 'string' || !isObject(version.schema)) continue;
      const schema = strictify(version.schema.openAPIV3Schema ?? {}, new Set()) as JsonObject;
      out.set(schemaFileName(group, version.name, names.kind), { $schema: 'http://json-schema.org/draft-07/schema#', ...schema });
    }
  }
  return out;
}

export function writeSchemas(dir: string, schemas: Map<string, JsonObject>): void {
  mkdirSync(dir, { recursive: true });
  for (const [file, schema] of schemas) writeFileSync(join(dir, file), JSON.stringify(schema));
}
