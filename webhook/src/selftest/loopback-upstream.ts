// The provider the chart's self-test calls through its sidecar: an OpenAI chat-completions answer with known
// token usage, served on the pod's loopback (the sidecar shares the pod's network), so `helm test` needs no
// provider account and sends nothing off the pod. It checks that the sidecar attached the key the test's
// Secret holds, which the test container never sends itself.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

/** What the answer bills: the self-test prices the model so that these tokens cost a known amount. */
export const SELFTEST_USAGE = { promptTokens: 1000, completionTokens: 10 } as const;
export const SELFTEST_MODEL = 'gpt-4o-mini';

export interface LoopbackUpstream {
  /** The Authorization header of each chat request received, in order. */
  readonly authorizations: Array<string | undefined>;
  close(): Promise<void>;
}

function answer(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

function handle(req: IncomingMessage, res: ServerResponse, port: number, authorizations: Array<string | undefined>): void {
  // Only the sidecar beside it calls this, by the loopback address it was configured with.
  if (req.headers.host !== `127.0.0.1:${port}` || req.headers.origin !== undefined) return answer(res, 403, { error: { message: 'not for this host or origin' } });
  if (req.method !== 'POST' || req.url !== '/v1/chat/completions') return answer(res, 404, { error: { message: `no ${req.method} ${req.url}` } });
  authorizations.push(req.headers.authorization);
  req.resume();
  req.on('end', () =>
    answer(res, 200, {
      id: 'chatcmpl-selftest',
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: SELFTEST_MODEL,
      choices: [{ index: 0, message: { role: 'assistant', content: 'Tollgate self-test' }, finish_reason: 'stop' }],
      usage: {
        prompt_tokens: SELFTEST_USAGE.promptTokens,
        completion_tokens: SELFTEST_USAGE.completionTokens,
        total_tokens: SELFTEST_USAGE.promptTokens + SELFTEST_USAGE.completionTokens,
      },
    }),
  );
}

export async function startLoopbackUpstream(port: number): Promise<LoopbackUpstream> {
  const authorizations: Array<string | undefined> = [];
  const server: Server = createServer((req, res) => handle(req, res, port, authorizations));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  return {
    authorizations,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
