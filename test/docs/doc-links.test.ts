// The docs are a README in front of reference pages that link to each other and to the code. Moving a heading
// or a file silently breaks those links, so every relative link (and its #anchor) must resolve, every file a
// page names in code marks (`sidecar/src/relay.ts`) must exist, and the ADR index must list every record.

import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

function markdownFiles(): string[] {
  const files = ['README.md', 'CONTRIBUTING.md', 'BENCHMARKS.md'];
  const walk = (dir: string): void => {
    for (const name of readdirSync(join(root, dir))) {
      const path = join(dir, name);
      if (statSync(join(root, path)).isDirectory()) walk(path);
      else if (name.endsWith('.md')) files.push(path);
    }
  };
  walk('docs');
  return files.filter((file) => existsSync(join(root, file)));
}

/** Markdown without fenced code blocks, where `#` lines and `[x](y)` are not headings or links. */
function prose(markdown: string): string {
  return markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '');
}

/** The anchors GitHub gives a page's headings: lowercased, punctuation dropped, spaces to '-', repeats numbered. */
function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const match of prose(markdown).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const text = match[1]!.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1');
    const slug = text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

function relativeLinks(markdown: string): string[] {
  const links: string[] = [];
  for (const match of prose(markdown)
    .replace(/`[^`\n]*`/g, '')
    .matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = match[1]!;
    if (!/^[a-z][a-z0-9+.-]*:/i.test(target)) links.push(target);
  }
  return links;
}

/** Repository files a page names in code marks, e.g. `test/docs/doc-links.test.ts`. */
function namedFiles(markdown: string): string[] {
  const folders = readdirSync(root).filter((name) => !name.startsWith('.') && name !== 'node_modules' && statSync(join(root, name)).isDirectory());
  const path = new RegExp(`^(${folders.join('|')})/[a-z0-9_./-]+\\.[a-z]+$`);
  return [...prose(markdown).matchAll(/`([^`\n]+)`/g)].map((match) => match[1]!).filter((text) => path.test(text));
}

describe('documentation links', () => {
  for (const file of markdownFiles()) {
    it(`${file}: every relative link and #anchor resolves`, () => {
      const broken: string[] = [];
      for (const link of relativeLinks(readFileSync(join(root, file), 'utf8'))) {
        const [path = '', anchor] = link.split('#');
        const target = path === '' ? join(root, file) : resolve(root, dirname(file), decodeURIComponent(path));
        if (!existsSync(target)) {
          broken.push(`${link}: no file ${relative(root, target)}`);
          continue;
        }
        if (anchor !== undefined && target.endsWith('.md') && !headingAnchors(readFileSync(target, 'utf8')).has(anchor)) {
          broken.push(`${link}: ${relative(root, target)} has no heading with anchor #${anchor}`);
        }
      }
      expect(broken).toEqual([]);
    });
  }

  // Decision records are history: they may name files that later moved, as they were when decided.
  for (const file of markdownFiles().filter((name) => !name.startsWith('docs/decisions/'))) {
    it(`${file}: every repository file it names exists`, () => {
      const missing = namedFiles(readFileSync(join(root, file), 'utf8')).filter((path) => !existsSync(join(root, path)));
      expect(missing).toEqual([]);
    });
  }

  it('the README stays a front page of at most 200 lines', () => {
    const lines = readFileSync(join(root, 'README.md'), 'utf8').split('\n').length;
    expect(lines).toBeLessThanOrEqual(200);
  });

  it('the ADR index lists every decision record, under its number', () => {
    const index = readFileSync(join(root, 'docs/decisions/README.md'), 'utf8');
    const records = readdirSync(join(root, 'docs/decisions')).filter((name) => /^\d{4}-.+\.md$/.test(name));
    const missing = records.filter((name) => !index.includes(`[${name.slice(0, 4)}](${name})`));
    expect(missing).toEqual([]);
  });
});

describe('heading anchors', () => {
  it('follow GitHub: punctuation and code marks dropped, spaces to hyphens, repeats numbered', () => {
    const anchors = headingAnchors('# Spans, pricing and usage\n## `GET /_local/api/config`\n## SIGTERM and SIGINT\n## Layers\n## Layers\n```\n# not a heading\n```\n');
    expect([...anchors]).toEqual(['spans-pricing-and-usage', 'get-_localapiconfig', 'sigterm-and-sigint', 'layers', 'layers-1']);
  });
});
