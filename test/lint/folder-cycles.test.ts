import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { folderCycles, importGraph } from './folder-cycles.ts';

let root: string | undefined;

/** A source tree on disk: path -> contents. */
function tree(files: Record<string, string>): string {
  root = mkdtempSync(join(tmpdir(), 'folder-cycles-'));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

afterEach(() => {
  if (root !== undefined) rmSync(root, { recursive: true, force: true });
  root = undefined;
});

describe('import cycles between folders', () => {
  it('names two folders that import each other, with the import that goes each way', () => {
    const cycles = folderCycles(
      importGraph(
        tree({
          'http/caller.ts': "import { meter } from '../metering/meter.ts';\nexport const caller = meter;\n",
          'metering/meter.ts': "import type { Gone } from '../http/gone.ts';\nexport const meter = 1;\n",
          'http/gone.ts': 'export type Gone = boolean;\n',
        }),
      ),
    );
    expect(cycles).toEqual([
      {
        nodes: ['http/', 'metering/'],
        imports: [
          { from: 'http/caller.ts', to: 'metering/meter.ts' },
          { from: 'metering/meter.ts', to: 'http/gone.ts' },
        ],
      },
    ]);
  });

  it('finds a cycle through three folders, and a file at the root as a node of its own', () => {
    const cycles = folderCycles(
      importGraph(
        tree({
          'a/one.ts': "import '../b/two.ts';\n",
          'b/two.ts': "export { three } from '../c/three.ts';\n",
          'c/three.ts': "export const three = await import('../a/one.ts');\n",
          'relay.ts': "import '../relay-free/x.ts';\nimport { y } from './http/y.ts';\n",
          'http/y.ts': "import type { R } from '../relay.ts';\nexport const y = 1;\n",
          'app.ts': "import './http/y.ts';\nimport './a/one.ts';\n",
        }),
      ),
    );
    expect(cycles.map((cycle) => cycle.nodes)).toEqual([
      ['a/', 'b/', 'c/'],
      ['http/', 'relay.ts'],
    ]);
  });

  it('reports nothing for layers that import one way, imports inside a folder, or a test reaching across', () => {
    const cycles = folderCycles(
      importGraph(
        tree({
          'http/proxy.ts': "import { price } from '../pricing/price.ts';\nimport './proxy-headers.ts';\n",
          'http/proxy-headers.ts': "import '../pricing/price.ts';\n",
          'pricing/price.ts': "import { usage } from '../usage/usage.ts';\nexport const price = usage;\n",
          'pricing/price.test.ts': "import '../http/proxy.ts';\n",
          'usage/usage.ts': "import { readFileSync } from 'node:fs';\nexport const usage = readFileSync;\n",
        }),
      ),
    );
    expect(cycles).toEqual([]);
  });
});
