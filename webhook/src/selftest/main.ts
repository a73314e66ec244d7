// `tollgate selftest`: the chart's checks that injection works (ADR 0812), run in pods the webhook injects.
//
//   tollgate selftest injection   the sidecar answers (the chart's post-install and post-upgrade hook)
//   tollgate selftest call        one metered call through the sidecar (the chart's `helm test`)
//
// Each prints a line per stage and exits 0, or names the stage that failed and why and exits 1.

import { parseArgs } from 'node:util';
import { DEFAULT_PORT } from '../sidecar-settings.ts';
import { checkInjection, runMeteredSelftest, SelftestFailure } from './selftest-checks.ts';

export const SELFTEST_USAGE = `usage: tollgate selftest injection [--sidecar-port N] [--timeout SECONDS]
       tollgate selftest call --proxy-config NAMESPACE/NAME --upstream-port N --input-per-million USD
                              [--sidecar-port N] [--timeout SECONDS] [--user ID]

Run in a pod the webhook injects. The call's provider is served on the pod's loopback; the ProxyConfig points
its beta route there and prices gpt-4o-mini at --input-per-million. The key the provider expects is read from
the environment variable SELFTEST_PROVIDER_KEY (the chart sets it from the ProxyConfig's Secret).
`;

class UsageError extends Error {}

/** A flag's number; without a fallback the flag is required. */
function number(value: string | undefined, flag: string, fallback: number | undefined, min: number, max: number): number {
  if (value === undefined) {
    if (fallback === undefined) throw new UsageError(`${flag} is required`);
    return fallback;
  }
  const n = Number(value);
  if (!Number.isFinite(n) || n < min || n > max) throw new UsageError(`${flag} must be a number from ${min} to ${max} (got ${JSON.stringify(value)})`);
  return n;
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      'sidecar-port': { type: 'string' },
      'upstream-port': { type: 'string' },
      'proxy-config': { type: 'string' },
      'input-per-million': { type: 'string' },
      timeout: { type: 'string' },
      user: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

async function run(argv: string[], env: NodeJS.ProcessEnv, log: (line: string) => void): Promise<number> {
  const { values, positionals } = parse(argv);
  if (values.help) {
    log(SELFTEST_USAGE);
    return 0;
  }
  const sidecarPort = number(values['sidecar-port'], '--sidecar-port', DEFAULT_PORT, 1, 65535);
  const timeoutMs = number(values.timeout, '--timeout', 60, 1, 600) * 1000;
  const [check] = positionals;
  if (check === 'injection') {
    log(`injection: ok, ${await checkInjection({ sidecarPort, timeoutMs })}`);
    return 0;
  }
  if (check !== 'call') throw new UsageError(`unknown check ${JSON.stringify(check ?? '')} (injection or call)`);
  const proxyConfig = values['proxy-config'];
  if (!proxyConfig || !/^[a-z0-9-]+\/[a-z0-9.-]+$/.test(proxyConfig)) throw new UsageError('--proxy-config NAMESPACE/NAME is required');
  const expectedKey = env.SELFTEST_PROVIDER_KEY;
  if (!expectedKey) throw new UsageError('SELFTEST_PROVIDER_KEY is not set: the key the provider must receive');
  await runMeteredSelftest(
    {
      sidecarPort,
      timeoutMs,
      proxyConfig,
      expectedKey,
      upstreamPort: number(values['upstream-port'], '--upstream-port', undefined, 1, 65535),
      inputPerMillion: number(values['input-per-million'], '--input-per-million', undefined, 0.000001, 1_000_000),
      user: values.user ?? 'helm-test',
    },
    log,
  );
  return 0;
}

export async function main(argv: string[]): Promise<number> {
  const log = (line: string) => process.stdout.write(`${line}\n`);
  try {
    return await run(argv, process.env, log);
  } catch (error) {
    if (error instanceof SelftestFailure) {
      process.stdout.write(`${error.stage}: FAILED, ${error.message}\n`);
      return 1;
    }
    if (error instanceof UsageError || (error as NodeJS.ErrnoException).code?.startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`tollgate selftest: ${(error as Error).message}\n\n${SELFTEST_USAGE}`);
      return 2;
    }
    throw error;
  }
}
