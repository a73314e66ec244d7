// Bodies for POST /_local/api/config: mostly shaped like a config patch (the sections, routes, providers and
// price fields the validator knows) with values drawn from the edges (huge, negative, fractional, wrong
// type, prototype names, long strings), then sometimes damaged as text (a key said twice, cut short, a
// stray byte). Shape-aware so that most bodies get past the first check and reach the deeper ones.

import type { Random } from './seeded-random.ts';

const NUMBERS = [0, -0, -1, 1, 0.5, 7, 10, 99, 100, 1024, 65535, 65536, 100_000, 100_000.5, 3_600_000, 2e302, 5e302, 1.7e308, 1e20, 1e-320, 9007199254740993];
const STRINGS = [
  '',
  ' ',
  'gpt-4o-mini',
  'GPT-4o-mini',
  'claude-sonnet-4@20250514',
  '__proto__',
  'constructor',
  'toString',
  'http://127.0.0.1:1',
  'http://127.0.0.1:1/base/../up',
  'https://user:secret@127.0.0.1:1',
  'ftp://127.0.0.1',
  'global',
  'us-central1',
  '/etc/passwd',
  'x'.repeat(3000),
  '\u0000\u202e😀',
  'gamma-direct',
  'alpha-compat',
];
const LIVE_SECTIONS = ['pricing', 'cache', 'upstreams', 'breaker', 'gateway'];
const OTHER_SECTIONS = ['credentials', 'server', 'storage', '__proto__', 'prices'];
const ROUTES = ['alpha', 'alpha-compat', 'beta', 'gamma', 'gamma-cloud', 'gamma-direct', 'gamma-cloudb', '__proto__', 'delta'];
const PROVIDERS = ['google', 'openai', 'anthropic', 'local', 'azure', 'constructor'];
const PRICE_FIELDS = ['input_per_million', 'output_per_million', 'cached_input_per_million', 'cache_write_per_million', 'cache_write_1h_per_million'];
const FIELDS: Record<string, readonly string[]> = {
  cache: ['ttl_seconds', 'cached_multiplier'],
  upstream: ['baseUrl', 'project', 'location', 'region', 'timeoutMs', 'apiKey'],
  breaker: ['consecutiveFailures', 'failureRatio', 'minimumRequests', 'windowMs', 'openMs', 'halfOpen'],
  gateway: ['anthropicRoute', 'googleRoute'],
  credentials: ['openaiApiKeyFile', 'googleCredentialsFile', 'awsAccessKeyIdFile'],
  server: ['host', 'port', 'allowedHosts'],
  storage: ['kind', 'path', 'maxSpans'],
};

function scalar(random: Random): unknown {
  const roll = random.next();
  if (roll < 0.45) return random.pick(NUMBERS);
  if (roll < 0.85) return random.pick(STRINGS);
  if (roll < 0.92) return random.chance(0.5);
  return null;
}

function anyValue(random: Random, depth = 0): unknown {
  const roll = random.next();
  if (depth > 3 || roll < 0.7) return scalar(random);
  if (roll < 0.85) return Array.from({ length: random.int(0, 4) }, () => anyValue(random, depth + 1));
  const out: Record<string, unknown> = {};
  for (let i = random.int(0, 3); i > 0; i--) out[random.pick([...STRINGS.slice(2, 8), 'a', 'b'])] = anyValue(random, depth + 1);
  return out;
}

/** Mostly the field's own kind of value, sometimes anything. */
function fieldValue(random: Random, field: string): unknown {
  if (random.chance(0.25)) return anyValue(random);
  if (/per_million|Ms|Failures|Requests|ttl|multiplier|Ratio|port|maxSpans|threshold/.test(field)) return random.pick(NUMBERS);
  return random.pick(STRINGS);
}

function section(random: Random, fields: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (let i = random.int(0, 3); i > 0; i--) {
    const field = random.pick(fields);
    out[field] = fieldValue(random, field);
  }
  return out;
}

/** Mostly an entry for the model the calls use, with plausible prices and now and then one from the edges. */
function priceEntry(random: Random): unknown {
  if (random.chance(0.05)) return anyValue(random);
  const entry: Record<string, unknown> = {
    provider: random.chance(0.6) ? 'openai' : random.pick(PROVIDERS),
    model: random.chance(0.6) ? 'gpt-4o-mini' : random.pick(STRINGS.slice(2, 6)),
  };
  for (const [i, field] of PRICE_FIELDS.entries()) {
    const required = i < 2;
    if (!random.chance(required ? 0.9 : 0.4)) continue;
    entry[field] = random.chance(0.6) ? random.pick([0, 0.15, 2.5, 75, 100_000]) : fieldValue(random, field);
  }
  if (random.chance(0.15)) entry.aliases = [random.pick(STRINGS), random.pick(STRINGS)];
  if (random.chance(0.1)) entry.disabled = random.chance(0.5) ? true : 'yes';
  if (random.chance(0.1)) entry.long_context = { threshold_tokens: random.pick(NUMBERS), input_per_million: random.pick(NUMBERS), output_per_million: random.pick(NUMBERS) };
  if (random.chance(0.05)) entry[random.pick(['input_per_milion', '__proto__', 'currency'])] = 1;
  return entry;
}

function patch(random: Random): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (let i = random.int(random.chance(0.05) ? 0 : 1, 3); i > 0; i--) {
    const name = random.pick(random.chance(0.85) ? LIVE_SECTIONS : OTHER_SECTIONS);
    switch (name) {
      case 'pricing':
        body.pricing = random.chance(0.9) ? { models: Array.from({ length: random.int(0, 4) }, () => priceEntry(random)) } : anyValue(random);
        break;
      case 'upstreams': {
        const upstreams: Record<string, unknown> = {};
        for (let j = random.int(0, 2); j > 0; j--) upstreams[random.pick(ROUTES)] = section(random, FIELDS.upstream!);
        body.upstreams = upstreams;
        break;
      }
      case 'cache': {
        const cache: Record<string, unknown> = {};
        for (let j = random.int(0, 2); j > 0; j--) cache[random.pick(PROVIDERS)] = section(random, FIELDS.cache!);
        body.cache = cache;
        break;
      }
      default:
        body[name] = FIELDS[name] ? section(random, FIELDS[name]) : anyValue(random);
    }
  }
  return body;
}

/** One request body, as text: damaged text may not parse, on purpose. */
export function configBody(random: Random): string {
  let text = JSON.stringify(patch(random));
  const damage = random.next();
  if (damage < 0.08) {
    // a key said twice: the first top-level key again, with another value
    const match = /^\{("[^"]+"):/.exec(text);
    if (match) text = `{${match[1]}:${JSON.stringify(anyValue(random))},${text.slice(1)}`;
  } else if (damage < 0.13) {
    text = text.slice(0, random.int(0, text.length));
  } else if (damage < 0.17) {
    const at = random.int(0, text.length);
    text = text.slice(0, at) + random.pick(['"', '{', ']', ',', '\\', '\u0000', '\ud800']) + text.slice(at);
  } else if (damage < 0.19) {
    text = `${'['.repeat(5000)}${']'.repeat(5000)}`;
  }
  return text;
}
