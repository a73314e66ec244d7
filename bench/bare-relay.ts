// The yardstick of the side-by-side benchmark: nginx from Debian as a bare relay (proxy_pass, keep-alive to the
// upstream) in front of a fast fake upstream, also nginx, answering an OpenAI chat completion from memory. The
// same load generator (wrk) drives the upstream directly, the bare relay and Tollgate, so what Tollgate adds is
// measured against what any relay adds on the same machine in the same minute.
//
// nginx and wrk are installed with apt-get when missing (root only; the services they ship are not started).

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../test/e2e/proxy-process.ts';
import { ensureDebianPackages, missingPackages } from '../test/kind/host-packages.ts';
import { waitFor } from '../test/support/wait-for.ts';

export const BENCH_PACKAGES = ['nginx-light', 'wrk'] as const;
const NGINX = '/usr/sbin/nginx';

/** The fake's answers: the shapes OpenAI sends, with usage, so Tollgate meters and prices every call. */
export const CHAT_JSON =
  '{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"},"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":2,"total_tokens":13}}';
const SSE_EVENTS = [
  '{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}],"usage":null}',
  '{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"content":"!"},"finish_reason":"stop"}],"usage":null}',
  '{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini-2024-07-18","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":2,"total_tokens":13}}',
];
export const CHAT_SSE = `${SSE_EVENTS.map((e) => `data: ${e}\n\n`).join('')}data: [DONE]\n\n`;
/** Send this header with the value `sse` for a streamed answer (Tollgate forwards it like any caller header). */
export const REPLY_HEADER = 'x-bench-reply';

export interface BareRelay {
  /** The fast fake upstream (nginx answering from memory). */
  upstreamUrl: string;
  /** nginx proxy_pass to that upstream. */
  relayUrl: string;
  /** nginx's master process and its worker. */
  pids(): number[];
  stop(): Promise<void>;
}

/** Installs nginx and wrk if missing. Returns why the benchmark cannot run, or null. */
export async function ensureBenchTools(log: (line: string) => void): Promise<string | null> {
  if (missingPackages(BENCH_PACKAGES).length === 0) return null;
  if (process.getuid?.() !== 0) return `Debian packages ${missingPackages(BENCH_PACKAGES).join(' ')} are missing and installing them needs root`;
  await ensureDebianPackages(BENCH_PACKAGES, log);
  return null;
}

// nginx's quoted strings take \" and \n escapes.
const nginxString = (text: string) => `"${text.replaceAll('\\', '\\\\').replaceAll('"', '\\"').replaceAll('\n', '\\n')}"`;

export async function startBareRelay(dir: string): Promise<BareRelay> {
  mkdirSync(join(dir, 'temp'), { recursive: true });
  const upstreamPort = await freePort();
  const relayPort = await freePort();
  const temp = (name: string) => `${name}_temp_path ${join(dir, 'temp', name)};`;
  // One worker process each way: Tollgate is one Node process, the relay gets one core's worth too.
  const conf = `
worker_processes 1;
daemon off;
pid ${join(dir, 'nginx.pid')};
error_log ${join(dir, 'error.log')} warn;
events { worker_connections 4096; }
http {
  access_log off;
  ${temp('client_body')} ${temp('proxy')} ${temp('fastcgi')} ${temp('uwsgi')} ${temp('scgi')}
  keepalive_requests 1000000;
  upstream fake { server 127.0.0.1:${upstreamPort}; keepalive 64; }
  map $http_${REPLY_HEADER.replaceAll('-', '_')} $bench_reply { sse sse; default json; }
  server {
    listen 127.0.0.1:${upstreamPort};
    location = /v1/chat/completions {
      if ($bench_reply = sse) { return 599; }
      default_type application/json;
      return 200 ${nginxString(CHAT_JSON)};
    }
    error_page 599 = @sse;
    location @sse {
      default_type text/event-stream;
      return 200 ${nginxString(CHAT_SSE)};
    }
  }
  server {
    listen 127.0.0.1:${relayPort};
    location / {
      proxy_pass http://fake;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`;
  const confPath = join(dir, 'nginx.conf');
  writeFileSync(confPath, conf);
  const child: ChildProcess = spawn(NGINX, ['-c', confPath, '-p', dir], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (t: string) => (stderr += t));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const upstreamUrl = `http://127.0.0.1:${upstreamPort}`;
  const relayUrl = `http://127.0.0.1:${relayPort}`;
  await waitFor(
    'nginx answering',
    async () => {
      if (child.exitCode !== null) throw new Error(`nginx exited: ${stderr}`);
      try {
        return (await fetch(`${relayUrl}/v1/chat/completions`, { method: 'POST', body: '{}' })).status === 200;
      } catch {
        return false;
      }
    },
    { timeoutMs: 10_000 },
  );
  return {
    upstreamUrl,
    relayUrl,
    pids() {
      const children = readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
      return [child.pid!, ...children];
    },
    async stop() {
      child.kill('SIGQUIT');
      await exited;
    },
  };
}
