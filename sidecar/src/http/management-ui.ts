// GET /_local/: the management UI, a static page (sidecar/ui/) that reads and changes the engine through its
// own /_local/api. Nothing is built at run time and nothing comes from a CDN: the files are read once, at the
// first request for them (a sidecar nobody opens the page of never holds them), the chart library (uPlot) from
// node_modules. The page's calls to the API are same-origin, which the
// request guard lets through without opening the API to any other page (ADR 1400); the headers below keep
// the page from being framed by another site or running anything but its own scripts.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';

interface Asset {
  body: Buffer;
  type: string;
}

const UI_DIR = join(import.meta.dirname, '../../ui');

const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const PAGE_HEADERS = {
  'cache-control': 'no-cache',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'content-security-policy': CONTENT_SECURITY_POLICY,
};

/** A file of the page; absent (a build that left sidecar/ui out) answers 404 naming it, and the engine keeps serving. */
function uiFile(name: string, type: string): Asset | null {
  try {
    return { body: readFileSync(join(UI_DIR, name)), type };
  } catch {
    return null;
  }
}

/** A file of an npm package the page loads; absent (an image without it) answers 404 and the page does without. */
function packageFile(specifier: string, type: string): Asset | null {
  try {
    return { body: readFileSync(createRequire(import.meta.url).resolve(specifier)), type };
  } catch {
    return null;
  }
}

const ASSET_SOURCES: ReadonlyMap<string, () => Asset | null> = new Map([
  ['index.html', () => uiFile('index.html', 'text/html; charset=utf-8')],
  ['app.js', () => uiFile('app.js', 'text/javascript; charset=utf-8')],
  ['app.css', () => uiFile('app.css', 'text/css; charset=utf-8')],
  ['vendor/uPlot.iife.min.js', () => packageFile('uplot/dist/uPlot.iife.min.js', 'text/javascript; charset=utf-8')],
  ['vendor/uPlot.min.css', () => packageFile('uplot/dist/uPlot.min.css', 'text/css; charset=utf-8')],
]);

export const managementUiRoutes: FastifyPluginAsync = async (app) => {
  const loaded = new Map<string, Asset | null>();
  const asset = (name: string): Asset | null => {
    const source = ASSET_SOURCES.get(name);
    // Only the page's own files are remembered: a name a caller made up must not grow this map.
    if (!source) return null;
    if (!loaded.has(name)) loaded.set(name, source());
    return loaded.get(name) ?? null;
  };
  const notFound = (reply: FastifyReply, name: string) => reply.code(404).send({ error: { code: 'not_found', message: `no UI file ${JSON.stringify(name)}` } });
  const send = (reply: FastifyReply, name: string) => {
    const found = asset(name);
    if (!found) return notFound(reply, name);
    return reply.headers({ ...PAGE_HEADERS, 'content-type': found.type }).send(found.body);
  };

  app.get('/_local', async (_request, reply) => reply.redirect('/_local/', 308));
  app.get('/_local/', async (_request, reply) => send(reply, 'index.html'));
  app.get<{ Params: { '*': string } }>('/_local/ui/*', async (request, reply) => {
    const name = request.params['*'];
    // the page itself is served at /_local/ only
    return name === 'index.html' ? notFound(reply, name) : send(reply, name);
  });
};
