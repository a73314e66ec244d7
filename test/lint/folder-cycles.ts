// Lint step (ADR 1700): no two folders of sidecar/src import each other, directly or through other folders.
// A file at sidecar/src's root is a node of its own (app.ts and main.ts compose every folder; relay.ts must
// not be imported back by the folders it uses). Type-only imports count: a folder that needs another's types
// depends on it as much as one that calls it.
//
// Run by `npm run lint` after knip: prints each cycle with the imports between its folders, and exits 1.

import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';

/** One import between two nodes: the file that imports and the file it names. */
export interface FolderImport {
  from: string;
  to: string;
}

/** The node a file of `root` belongs to: its first folder below root, or the file itself at root. */
function nodeOf(root: string, file: string): string | undefined {
  const path = relative(root, file);
  if (path.startsWith('..')) return undefined;
  const parts = path.split(sep);
  return parts.length === 1 ? parts[0] : `${parts[0]}/`;
}

/**
 * The strongly connected groups of nodes with more than one member, each sorted, with one import per edge
 * inside the group (the first seen). `imports` are file-to-file imports already mapped to their nodes.
 */
export function folderCycles(edges: ReadonlyMap<string, ReadonlyMap<string, FolderImport>>): { nodes: string[]; imports: FolderImport[] }[] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const groups: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, index.size);
    low.set(node, index.get(node)!);
    stack.push(node);
    onStack.add(node);
    for (const next of edges.get(node)?.keys() ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) low.set(node, Math.min(low.get(node)!, index.get(next)!));
    }
    if (low.get(node) !== index.get(node)) return;
    const group: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      group.push(member);
    } while (member !== node);
    if (group.length > 1) groups.push(group.sort());
  };
  for (const node of [...edges.keys()].sort()) if (!index.has(node)) visit(node);
  return groups
    .map((nodes) => {
      const inside = new Set(nodes);
      const imports = nodes.flatMap((from) => [...(edges.get(from) ?? new Map<string, FolderImport>())].filter(([to]) => inside.has(to)).map(([, example]) => example));
      return { nodes, imports };
    })
    .sort((a, b) => a.nodes[0]!.localeCompare(b.nodes[0]!));
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((entry) => {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) return sourceFiles(path);
      return entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts') ? [path] : [];
    })
    .sort();
}

/** The node-to-node imports of the production files under `root` (tests may reach across folders). */
export function importGraph(root: string): Map<string, Map<string, FolderImport>> {
  const edges = new Map<string, Map<string, FolderImport>>();
  for (const file of sourceFiles(root)) {
    const from = nodeOf(root, file)!;
    for (const reference of ts.preProcessFile(readFileSync(file, 'utf8'), true, true).importedFiles) {
      if (!reference.fileName.startsWith('.')) continue;
      const target = resolve(dirname(file), reference.fileName);
      const to = nodeOf(root, target);
      if (to === undefined || to === from) continue;
      const out = edges.get(from) ?? new Map<string, FolderImport>();
      edges.set(from, out);
      if (!out.has(to)) out.set(to, { from: relative(root, file), to: relative(root, target) });
    }
  }
  return edges;
}

function main(): void {
  const root = resolve(import.meta.dirname, '../../sidecar/src');
  const cycles = folderCycles(importGraph(root));
  for (const cycle of cycles) {
    console.error(`import cycle between ${cycle.nodes.join(', ')} (sidecar/src):`);
    for (const { from, to } of cycle.imports) console.error(`  ${from} imports ${to}`);
  }
  if (cycles.length > 0) {
    console.error('a folder of sidecar/src may not import one that imports it back, directly or through others (ADR 1700)');
    process.exitCode = 1;
  }
}

if (import.meta.main) main();
