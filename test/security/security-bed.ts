// One proxy process for a security test file, the way a developer runs it: real `tollgate proxy`, real
// SQLite, and behind the routes a recording upstream that answers like OpenAI and keeps every request it got,
// so a test can tell what reached the provider (and with which key) and what never left the proxy.
// Only the process boundary is used (HTTP, raw sockets, the span file), so the suite runs unchanged against
// any build of the engine.

import type { ServerResponse } from 'node:http';
import { startFakeMetadataServer, type FakeMetadataServer } from '../fakes/google-token-endpoints.ts';
import { startRecordingServer, type RecordedCall, type RecordingServer } from '../fakes/recording-server.ts';
import { startProxyProcess, type ProxyProcess } from '../e2e/proxy-process.ts';
import type { SpanJson } from '../../sidecar/src/spans/span-json.ts';

export const OPENAI_KEY = 'sk-proxy-own-openai-key';

export type UpstreamReply = (call: RecordedCall, res: ServerResponse) => void;

export interface SecurityBed {
  proxy: ProxyProcess;
  /** The upstream of beta, gamma-direct and gamma-cloud, each under the base path /base. */
  upstream: RecordingServer;
  metadata: FakeMetadataServer;
  /** How the upstream answers; by default an OpenAI chat completion with 12 + 5 tokens. */
  reply: UpstreamReply;
  spans(): Promise<SpanJson[]>;
  span(spanId: string | null | undefined): Promise<SpanJson | undefined>;
  close(): Promise<void>;
}

export const chatCompletion = (usage: Record<string, unknown> = { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17 }) => ({
  id: 'chatcmpl-1',
  object: 'chat.completion',
  created: 1,
  model: 'gpt-4o-mini-2024-07-18',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Hello' }, finish_reason: 'stop' }],
  usage,
});

export const defaultReply: UpstreamReply = (_call, res) => {
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(chatCompletion()));
};

export async function startSecurityBed(opts: { configYaml?: string; env?: NodeJS.ProcessEnv; args?: string[] } = {}): Promise<SecurityBed> {
  const bed = { reply: defaultReply } as SecurityBed;
  bed.upstream = await startRecordingServer((call, res) => bed.reply(call, res));
  bed.metadata = await startFakeMetadataServer({ projectId: 'security-test' });
  const base = `${bed.upstream.url}/base`;
  bed.proxy = await startProxyProcess({
    configYaml: `
upstreams:
  beta: { baseUrl: "${base}" }
  gamma-direct: { baseUrl: "${base}" }
  gamma-cloud: { baseUrl: "${base}", project: security-test, location: us-east5 }
  alpha: { baseUrl: "${base}", project: security-test, location: us-central1 }
storage: { kind: sqlite, path: spans.db }
${opts.configYaml ?? ''}`,
    env: { OPENAI_API_KEY: OPENAI_KEY, ANTHROPIC_API_KEY: 'sk-ant-proxy-own', GCE_METADATA_HOST: bed.metadata.host, ...opts.env },
    ...(opts.args ? { args: opts.args } : {}),
  });
  bed.spans = async () => ((await (await fetch(`${bed.proxy.url}/_local/api/traces?limit=200`)).json()) as { spans: SpanJson[] }).spans;
  bed.span = async (spanId) => (await bed.spans()).find((s) => s.span_id === spanId);
  bed.close = async () => {
    await bed.proxy.stop();
    await bed.upstream.close();
    await bed.metadata.close();
  };
  return bed;
}

/** A JSON POST as an SDK sends it. */
export function postJson(bed: SecurityBed, path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${bed.proxy.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
}

export const chat = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] };
