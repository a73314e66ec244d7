// CRD source → TypeScript declarations. Pure and deterministic: types appear in the order they are first
// met walking the schema, properties in source order. Every object with properties carries a `tsType`
// name, so the generated file reads like hand-written API types rather than nested anonymous shapes.

import type { CrdSource, SchemaNode } from './crd-schema.ts';

// Metadata is validated by the API server, not by our schema; these are the fields Tollgate code reads.
// Timestamps are RFC 3339 strings, as custom objects arrive as plain JSON.
const BUILTINS: Readonly<Record<string, string>> = {
  ObjectMeta: `/** Object metadata (the metav1.ObjectMeta fields Tollgate reads and writes). */
export interface ObjectMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
}`,
  ListMeta: `/** List metadata (metav1.ListMeta). */
export interface ListMeta {
  resourceVersion?: string;
  continue?: string;
}`,
};

function docComment(text: string | undefined, indent: string): string {
  if (!text) return '';
  return `${indent}/** ${text.replaceAll('*/', '*\\/')} */\n`;
}

function tsString(value: string): string {
  return `'${value.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
}

function propertyKey(name: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(name) ? name : tsString(name);
}

function propertyDoc(node: SchemaNode): string | undefined {
  if (node.default === undefined) return node.description;
  return `${node.description ?? ''} Default: ${JSON.stringify(node.default)}.`.trim();
}

/** A node's identity for the "same name, same shape" check; descriptions may differ per use. */
function shapeOf(node: SchemaNode): string {
  return JSON.stringify({ ...node, description: undefined });
}

class TypeWriter {
  /** Types another generated file declares: referred to by name, not declared again. */
  private readonly imported: ReadonlySet<string>;
  private readonly declarations = new Map<string, string>();
  private readonly shapes = new Map<string, string>();
  private readonly docs = new Map<string, string | undefined>();
  private readonly order: string[] = [];

  declare(name: string, node: SchemaNode, path: string): void {
    const shape = shapeOf(node);
    const seen = this.shapes.get(name);
    if (seen !== undefined) {
      if (seen !== shape) throw new Error(`${path}: tsType ${name} is already used for a different schema`);
      // Keep an interface comment only when every use describes it the same way.
      if (this.docs.get(name) !== node.description) this.docs.set(name, undefined);
      return;
    }
    this.shapes.set(name, shape);
    this.docs.set(name, node.description);
    this.order.push(name);
    this.declarations.set(name, ''); // reserved before recursing: the order is that of first mention
    this.declarations.set(name, this.body(name, node, path));
  }

  private body(name: string, node: SchemaNode, path: string): string {
    if (node.type === 'object' && node.properties) {
      const required = new Set(node.required ?? []);
      const lines = Object.entries(node.properties).map(([key, child]) => {
        const optional = required.has(key) ? '' : '?';
        return `${docComment(propertyDoc(child), '  ')}  ${propertyKey(key)}${optional}: ${this.expr(child, `${path}.${key}`)};`;
      });
      return `export interface ${name} {\n${lines.join('\n')}\n}`;
    }
    return `export type ${name} = ${this.inline(node, path)};`;
  }

  constructor(imported: ReadonlySet<string> = new Set()) {
    this.imported = imported;
  }

  /** The declared names, in order. */
  names(): string[] {
    return [...this.order];
  }

  expr(node: SchemaNode, path: string): string {
    if (node.tsType !== undefined && this.imported.has(node.tsType)) return node.tsType;
    if (node.tsType !== undefined) {
      if (BUILTINS[node.tsType] !== undefined && !node.properties) {
        this.builtin(node.tsType);
      } else {
        this.declare(node.tsType, node, path);
      }
      return node.tsType;
    }
    return this.inline(node, path);
  }

  builtin(name: string): void {
    this.raw(name, BUILTINS[name]!);
  }

  /** A declaration written out in full (its own doc comment included). */
  raw(name: string, declaration: string): void {
    if (this.declarations.has(name)) return;
    this.order.push(name);
    this.declarations.set(name, declaration);
    this.docs.set(name, undefined);
  }

  private inline(node: SchemaNode, path: string): string {
    switch (node.type) {
      case 'string':
      case 'number':
      case 'integer':
        if (node.enum) return node.enum.map((v) => (typeof v === 'string' ? tsString(v) : String(v))).join(' | ');
        return node.type === 'string' ? 'string' : 'number';
      case 'boolean':
        return 'boolean';
      case 'array': {
        if (!node.items) throw new Error(`${path}: array without items`);
        const item = this.expr(node.items, `${path}[]`);
        return item.includes(' ') ? `(${item})[]` : `${item}[]`;
      }
      case 'object':
        if (node.additionalProperties) {
          return `Record<string, ${this.expr(node.additionalProperties, `${path}.*`)}>`;
        }
        if (node.properties) throw new Error(`${path}: an object with properties needs a tsType name`);
        return 'Record<string, unknown>';
    }
  }

  render(): string {
    return this.order
      .map((name) => {
        const decl = this.declarations.get(name)!;
        return decl.startsWith('/**') ? decl : `${docComment(this.docs.get(name), '')}${decl}`;
      })
      .join('\n\n');
  }
}

const HEADER =
  '// Generated by `node crds/generate.ts` from crds/*.ts. Do not edit: change the source and regenerate.\n' +
  '// API types of the tollgate.dev custom resources, free of Kubernetes client imports.\n';

/** Types written into another file (the price entry contracts/ shares): its schema nodes and where it is. */
export interface SharedTypes {
  nodes: readonly SchemaNode[];
  /** The file, relative to crds/generated/. */
  from: string;
}

function sharedWriter(shared: SharedTypes): TypeWriter {
  const writer = new TypeWriter();
  for (const node of shared.nodes) writer.expr(node, node.tsType ?? 'node');
  return writer;
}

/** The shared types' own file, under the given header. */
export function renderSharedTypes(shared: SharedTypes, header: string): string {
  return `${header}\n${sharedWriter(shared).render()}\n`;
}

/** The CRDs' types; those in `shared` are imported from their files and exported again, not declared twice. */
export function renderTypes(sources: readonly CrdSource[], shared: readonly SharedTypes[] = []): string {
  const imports = shared.map((set) => ({ from: set.from, names: sharedWriter(set).names() }));
  const writer = new TypeWriter(new Set(imports.flatMap((set) => set.names)));
  for (const source of sources) {
    const storage = source.versions.find((v) => v.storage);
    if (!storage) throw new Error(`CRD ${source.plural}.${source.group} has no storage version`);
    const root = storage.schema;
    if (root.tsType !== source.kind) throw new Error(`${source.kind}: the root schema's tsType must be the kind`);
    writer.expr(root, source.kind);
    writer.builtin('ListMeta');
    writer.raw(
      source.listKind,
      `/** A list of ${source.kind} objects. */
export interface ${source.listKind} {
  apiVersion?: string;
  kind?: string;
  metadata?: ListMeta;
  items: ${source.kind}[];
}`,
    );
  }
  const reexport = imports
    .filter((set) => set.names.length > 0)
    .map((set) => `import type { ${set.names.join(', ')} } from '${set.from}';\nexport type { ${set.names.join(', ')} };\n\n`)
    .join('');
  return `${HEADER}\n${reexport}${writer.render()}\n`;
}
