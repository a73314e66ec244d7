// The chart's self-tests (ADR 0812), run in a pod the webhook injects. Each stage of "a metered call through
// an injected pod" is checked on its own, so a failure names the stage that broke and what was seen there:
//
//   injection   the sidecar answers on the pod's loopback (else the webhook did not inject the pod)
//   config      the sidecar runs the ProxyConfig the pod names (else the operator's push did not reach it)
//   credentials the provider received the key of the ProxyConfig's Secret (else the snapshot's key did not)
//   metering    the call's span holds the tokens, the user and the cost at the ProxyConfig's price
//
// They talk to the sidecar over HTTP only, as an application in the pod would.

import { setTimeout as sleep } from 'node:timers/promises';
import { SELFTEST_MODEL, SELFTEST_USAGE, startLoopbackUpstream } from './loopback-upstream.ts';

export type SelftestStage = 'injection' | 'config' | 'credentials' | 'metering';

export class SelftestFailure extends Error {
  readonly stage: SelftestStage;
  constructor(stage: SelftestStage, message: string) {
    super(message);
    this.name = 'SelftestFailure';
    this.stage = stage;
  }
}

export interface InjectionCheckOptions {
  sidecarPort: number;
  timeoutMs: number;
}

export interface MeteredCallOptions extends InjectionCheckOptions {
  /** Where the loopback provider listens; the ProxyConfig points the `beta` route at it. */
  upstreamPort: number;
  /** `namespace/name` of the ProxyConfig the pod names, for the messages. */
  proxyConfig: string;
  /** The ProxyConfig's input price of the model, USD per million tokens. */
  inputPerMillion: number;
  /** The key the ProxyConfig's Secret holds. */
  expectedKey: string;
  user: string;
}

const USER_HEADER = 'x-tollgate-user';

async function getJson(url: string): Promise<{ status: number; body: unknown }> {
  const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
  return { status: res.status, body: await res.json().catch(() => undefined) };
}

/** Polls `probe` until it returns a value or the time is up; then fails with what `lastSeen` says. */
async function until<T>(timeoutMs: number, probe: () => Promise<T | undefined>, fail: () => SelftestFailure): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() >= deadline) throw fail();
    await sleep(500);
  }
}

/** The sidecar answers on loopback: the webhook injected this pod. */
export async function checkInjection(opts: InjectionCheckOptions): Promise<string> {
  const base = `http://127.0.0.1:${opts.sidecarPort}`;
  await until(
    opts.timeoutMs,
    async () => ((await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(2_000) })).ok ? true : undefined),
    () =>
      new SelftestFailure(
        'injection',
        `no Tollgate sidecar answers on ${base} after ${opts.timeoutMs / 1000} s: the webhook did not inject this pod (kubectl get events for SidecarMissing, and the webhook's readiness)`,
      ),
  );
  return `the sidecar answers on ${base}`;
}

interface ConfigView {
  config?: { upstreams?: { beta?: { baseUrl?: string } }; pricing?: { overrides?: Array<{ provider: string; model: string; input_per_million: number }> } };
}

/** The sidecar runs the pod's ProxyConfig: its upstream and its price. */
async function checkConfig(opts: MeteredCallOptions): Promise<string> {
  const base = `http://127.0.0.1:${opts.sidecarPort}`;
  const upstream = `http://127.0.0.1:${opts.upstreamPort}`;
  let seen = 'nothing (the sidecar did not answer)';
  await until(
    opts.timeoutMs,
    async () => {
      const { body } = await getJson(`${base}/_local/api/config`);
      const config = (body as ConfigView | undefined)?.config;
      const price = config?.pricing?.overrides?.find((p) => p.provider === 'openai' && p.model === SELFTEST_MODEL)?.input_per_million;
      seen = `upstreams.beta.baseUrl ${JSON.stringify(config?.upstreams?.beta?.baseUrl ?? null)}, ${SELFTEST_MODEL} input price ${JSON.stringify(price ?? null)}`;
      return config?.upstreams?.beta?.baseUrl === upstream && price === opts.inputPerMillion ? true : undefined;
    },
    () =>
      new SelftestFailure(
        'config',
        `the sidecar did not get ProxyConfig ${opts.proxyConfig} from the operator within ${opts.timeoutMs / 1000} s; it runs ${seen} ` +
          `(kubectl get proxyconfig -n ${opts.proxyConfig.replace('/', ' ')}: is it Ready? Is the operator running, does it watch this namespace?)`,
      ),
  );
  return `the sidecar runs ProxyConfig ${opts.proxyConfig} (upstream ${upstream}, input price $${opts.inputPerMillion} per million tokens)`;
}

interface Span {
  span_id: string;
  model: string;
  user_id: string | null;
  input_tokens: number;
  cost_usd: number;
  status: string;
}

/** One call through the sidecar; the provider saw the Secret's key; the span has the tokens, user and cost. */
async function checkMeteredCall(opts: MeteredCallOptions, authorizations: ReadonlyArray<string | undefined>): Promise<string> {
  const base = `http://127.0.0.1:${opts.sidecarPort}`;
  const res = await fetch(`${base}/proxy/beta/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', [USER_HEADER]: opts.user },
    body: JSON.stringify({ model: SELFTEST_MODEL, messages: [{ role: 'user', content: 'Tollgate self-test' }] }),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  const received = authorizations.at(-1);
  if (received === undefined) throw new SelftestFailure('credentials', `the call did not reach the provider: the sidecar answered ${res.status} ${text.slice(0, 300)}`);
  if (received !== `Bearer ${opts.expectedKey}`) {
    throw new SelftestFailure('credentials', `the provider did not get the key of ProxyConfig ${opts.proxyConfig}'s Secret (it got ${received ? 'another key' : 'none'})`);
  }
  if (res.status !== 200) throw new SelftestFailure('metering', `the call through the sidecar answered ${res.status}: ${text.slice(0, 300)}`);
  const spanId = res.headers.get('x-proxy-span-id');
  if (!spanId) throw new SelftestFailure('metering', 'the sidecar answered without an x-proxy-span-id header: the call was not metered');
  const expectedCost = (SELFTEST_USAGE.promptTokens * opts.inputPerMillion) / 1_000_000;
  const span = await until(
    opts.timeoutMs,
    async () => ((await getJson(`${base}/_local/api/traces?limit=50`)).body as { spans?: Span[] }).spans?.find((s) => s.span_id === spanId),
    () => new SelftestFailure('metering', `span ${spanId} of the call is not in the sidecar's span store after ${opts.timeoutMs / 1000} s`),
  );
  const problems = [
    span.input_tokens !== SELFTEST_USAGE.promptTokens && `input tokens ${span.input_tokens}, not ${SELFTEST_USAGE.promptTokens}`,
    span.user_id !== opts.user && `user ${JSON.stringify(span.user_id)}, not ${JSON.stringify(opts.user)}`,
    Math.abs(span.cost_usd - expectedCost) > 1e-9 && `cost $${span.cost_usd}, not $${expectedCost} (the ProxyConfig's price)`,
    span.status !== 'ok' && `status ${span.status}`,
  ].filter(Boolean);
  if (problems.length) throw new SelftestFailure('metering', `span ${spanId}: ${problems.join('; ')}`);
  return `span ${spanId}: ${span.input_tokens} input tokens of ${span.model} for ${span.user_id}, $${span.cost_usd}`;
}

/** The `helm test` path: injection, config, credentials and metering, one after the other. */
export async function runMeteredSelftest(opts: MeteredCallOptions, log: (line: string) => void): Promise<void> {
  const upstream = await startLoopbackUpstream(opts.upstreamPort);
  try {
    log(`injection: ok, ${await checkInjection(opts)}`);
    log(`config: ok, ${await checkConfig(opts)}`);
    const metered = await checkMeteredCall(opts, upstream.authorizations);
    log(`credentials: ok, the provider got the key of ProxyConfig ${opts.proxyConfig}'s Secret`);
    log(`metering: ok, ${metered}`);
  } finally {
    await upstream.close();
  }
}
