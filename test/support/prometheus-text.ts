// Reads samples back from a /metrics body (Prometheus text 0.0.4 or OpenMetrics), for tests that check the
// values a scrape shows after known calls.

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseSamples(body: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of body.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = LINE.exec(line);
    if (!match) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, raw] of (match[2] ?? '').matchAll(LABEL)) labels[key!] = raw!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

/** The value of the one sample with this name whose labels include `labels`; undefined when there is none. */
export function sampleValue(body: string | Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const samples = typeof body === 'string' ? parseSamples(body) : body;
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  if (found.length > 1) throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(labels)}; name more labels`);
  return found[0]?.value;
}

/** The sum of every sample with this name whose labels include `labels` (0 when there is none). */
export function sampleSum(body: string | Sample[], name: string, labels: Record<string, string> = {}): number {
  const samples = typeof body === 'string' ? parseSamples(body) : body;
  return samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)).reduce((sum, s) => sum + s.value, 0);
}

/** The `# TYPE` of each metric family in the body. */
export function familyTypes(body: string): Map<string, string> {
  const types = new Map<string, string>();
  for (const line of body.split('\n')) {
    const match = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (match) types.set(match[1]!, match[2]!);
  }
  return types;
}
