// A fake LLM provider to try Tollgate by hand with no account and no bill (docs/budgets.md#try-it-on-your-machine).
// It is the fake the tests use: the provider's own wire format, and every reply reports the same token usage, so
// each call costs a known amount. For demos and tests only; it keeps every request in memory.
//
//   ./tollgatew node test/fakes/llm-upstream-cli.ts openai|anthropic [--port 9301] [--api-key KEY]
//                                                   [--input-tokens 1000] [--output-tokens 0]

import { parseArgs } from 'node:util';
import { startFakeUpstream } from './llm-upstream.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    port: { type: 'string', default: '9301' },
    'api-key': { type: 'string' },
    'input-tokens': { type: 'string', default: '1000' },
    'output-tokens': { type: 'string', default: '0' },
  },
});

function fail(message: string): never {
  process.stderr.write(`llm-upstream-cli: ${message}\n`);
  process.exit(2);
}

function count(flag: string, text: string): number {
  const n = Number(text);
  if (text.trim() === '' || !Number.isSafeInteger(n) || n < 0) fail(`--${flag} must be a whole number of 0 or more (got "${text}")`);
  return n;
}

const kind = positionals[0] ?? 'openai';
if (kind !== 'openai' && kind !== 'anthropic') fail(`the provider must be openai or anthropic (got "${kind}")`);
const usage = { input: count('input-tokens', values['input-tokens']), output: count('output-tokens', values['output-tokens']) };
const fake = await startFakeUpstream(kind, { port: count('port', values.port), ...(values['api-key'] ? { expectApiKey: values['api-key'] } : {}) });
fake.behave({ usage });
process.stdout.write(`fake ${kind} API: ${fake.url}
  every reply reports ${usage.input} input and ${usage.output} output tokens${values['api-key'] ? `; it accepts only the key ${values['api-key']}` : ''}
Ctrl-C stops it.
`);
const stop = () => void fake.close().then(() => process.exit(0));
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
