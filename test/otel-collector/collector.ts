// A real OpenTelemetry Collector for the OTLP tests: built once by build.sh (ocb, Go module proxy), started
// per test file with an OTLP receiver on gRPC and HTTP, and an OTLP/HTTP exporter in JSON that hands every
// span the collector decoded to a listener in the test process. So a test sees what a Jaeger or Tempo
// behind that collector would get, after the collector itself parsed our protobuf.

import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../control-plane/free-port.ts';
import { startManagedProcess, type ManagedProcess } from '../control-plane/managed-process.ts';
import { waitFor } from '../support/wait-for.ts';

const BUILD_SCRIPT = join(dirname(fileURLToPath(import.meta.url)), 'build.sh');

/** Builds the collector when it is not cached (minutes on a cold Go cache), else returns at once. */
export async function ensureCollectorBinary(): Promise<string> {
  const child = spawn('bash', [BUILD_SCRIPT], { stdio: ['ignore', 'pipe', 'inherit'] });
  let stdout = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout = (stdout + chunk).slice(-4096)));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', resolve);
  });
  if (code !== 0) throw new Error(`${BUILD_SCRIPT} failed with exit code ${code}; see its output above`);
  return stdout.trimEnd().split('\n').at(-1) ?? '';
}

/** One span as the collector re-exported it (OTLP/JSON), with its resource's attributes. */
export interface CollectedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: Record<string, AttributeValue>;
  status: { code?: number; message?: string };
  resource: Record<string, AttributeValue>;
  scope: { name: string; version?: string };
}

type Scalar = string | number | boolean;
type AttributeValue = Scalar | Scalar[];

interface AnyValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: AnyValue[] };
}
interface KeyValue {
  key: string;
  value: AnyValue;
}

function scalar(value: AnyValue): Scalar {
  return value.stringValue ?? (value.intValue !== undefined ? Number(value.intValue) : undefined) ?? value.doubleValue ?? value.boolValue ?? '';
}

function plain(attributes: KeyValue[] | undefined): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const { key, value } of attributes ?? []) out[key] = value.arrayValue ? (value.arrayValue.values ?? []).map(scalar) : scalar(value);
  return out;
}

export interface Collector {
  grpcEndpoint: string;
  httpEndpoint: string;
  spans: CollectedSpan[];
  /** Every request body the collector's exporter sent (one per batch it forwarded). */
  batches: number;
  process: ManagedProcess;
  waitForSpans(count: number, timeoutMs?: number): Promise<CollectedSpan[]>;
  stop(): Promise<void>;
}

export async function startCollector(binary: string): Promise<Collector> {
  const spans: CollectedSpan[] = [];
  let batches = 0;
  const sink: Server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      batches++;
      const request = JSON.parse(body) as {
        resourceSpans?: {
          resource?: { attributes?: KeyValue[] };
          scopeSpans?: { scope?: { name: string; version?: string }; spans?: (Omit<CollectedSpan, 'attributes' | 'resource' | 'scope'> & { attributes?: KeyValue[] })[] }[];
        }[];
      };
      for (const rs of request.resourceSpans ?? []) {
        const resource = plain(rs.resource?.attributes);
        for (const ss of rs.scopeSpans ?? []) {
          for (const s of ss.spans ?? []) spans.push({ ...s, parentSpanId: s.parentSpanId ?? '', attributes: plain(s.attributes), resource, scope: ss.scope ?? { name: '' } });
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
  const sinkPort = (sink.address() as { port: number }).port;
  const [grpcPort, httpPort] = [await freePort(), await freePort()];
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-otelcol-'));
  const config = join(dir, 'collector.yaml');
  writeFileSync(
    config,
    `receivers:
  otlp:
    protocols:
      grpc: { endpoint: "127.0.0.1:${grpcPort}" }
      http: { endpoint: "127.0.0.1:${httpPort}" }
exporters:
  otlphttp:
    traces_endpoint: "http://127.0.0.1:${sinkPort}/v1/traces"
    encoding: json
    compression: none
    retry_on_failure: { enabled: false }
service:
  telemetry:
    metrics: { level: none }
    logs: { level: info }
  pipelines:
    traces: { receivers: [otlp], exporters: [otlphttp] }
`,
  );
  const collectorProcess = startManagedProcess({ name: 'otelcol', command: binary, args: ['--config', config], logPath: join(dir, 'collector.log') });
  await waitFor(
    'the collector to start its receivers',
    () => {
      if (collectorProcess.hasExited()) throw new Error(`the collector exited:\n${collectorProcess.logTail(30)}`);
      return collectorProcess.logTail(200).includes('Everything is ready') || undefined;
    },
    60_000,
  );
  return {
    grpcEndpoint: `http://127.0.0.1:${grpcPort}`,
    httpEndpoint: `http://127.0.0.1:${httpPort}`,
    spans,
    get batches() {
      return batches;
    },
    process: collectorProcess,
    waitForSpans: (count, timeoutMs = 20_000) => waitFor(`${count} spans at the collector`, () => (spans.length >= count ? spans : undefined), timeoutMs),
    async stop() {
      await collectorProcess.stop();
      await new Promise<void>((resolve) => sink.close(() => resolve()));
    },
  };
}
