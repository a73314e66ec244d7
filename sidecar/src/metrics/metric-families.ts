// Counters and histograms for the request path, registered in a prom-client Registry, which formats them
// (text and OpenMetrics). prom-client's own label children hash their label values into a new string on
// every inc() and observe(); these keep one object per label set, created the first time the set is seen
// and held by the caller, so recording a call only adds to numbers (ADR 1500).
//
// The objects follow the metric contract prom-client's Registry reads: `name`, `help`, `type`, and get()
// returning `{ name, help, type, values: [{ labels, value, metricName? }], aggregator }`.

import type { Registry, RegistryContentType } from 'prom-client';

type Labels = Readonly<Record<string, string>>;

/** One sample as prom-client's Registry reads it (its own types for this are not exported). */
interface Sample {
  labels: Readonly<Record<string, string | number>>;
  value: number;
  metricName?: string;
}

interface Collected {
  name: string;
  help: string;
  type: 'counter' | 'histogram';
  aggregator: 'sum';
  values: Sample[];
}

function labelSet(names: readonly string[], values: readonly string[]): Labels {
  if (values.length !== names.length) throw new RangeError(`expected ${names.length} label values (${names.join(', ')}), got ${values.length}`);
  const labels: Record<string, string> = {};
  names.forEach((name, i) => (labels[name] = values[i]!));
  return Object.freeze(labels);
}

export class CounterSeries {
  value = 0;
  readonly labels: Labels;

  constructor(labels: Labels) {
    this.labels = labels;
  }

  inc(amount = 1): void {
    this.value += amount;
  }
}

abstract class Family<S> {
  // prom-client renames counters in place while it renders OpenMetrics (MetricsExposition restores them).
  name: string;
  readonly help: string;
  readonly labelNames: readonly string[];
  readonly aggregator = 'sum' as const;
  protected readonly all: S[] = [];

  constructor(registry: Registry<RegistryContentType>, name: string, help: string, labelNames: readonly string[]) {
    this.name = name;
    this.help = help;
    this.labelNames = labelNames;
    registry.registerMetric(this as never);
  }
}

/** A counter whose label sets the caller creates once and keeps. Collect-time sources may set `value` directly. */
export class CounterFamily extends Family<CounterSeries> {
  readonly type = 'counter' as const;
  readonly #collect: (() => void) | undefined;

  constructor(registry: Registry<RegistryContentType>, name: string, help: string, labelNames: readonly string[] = [], collect?: () => void) {
    super(registry, name, help, labelNames);
    this.#collect = collect;
  }

  /** A new series; call once per label set and keep it (creating the same set twice gives two samples). */
  series(...labelValues: string[]): CounterSeries {
    const series = new CounterSeries(labelSet(this.labelNames, labelValues));
    this.all.push(series);
    return series;
  }

  /** Forgets every series (for families rebuilt from their source at each scrape). */
  clear(): void {
    this.all.length = 0;
  }

  get(): Collected {
    this.#collect?.();
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: this.all.map((s) => ({ labels: s.labels, value: s.value })) };
  }
}

export class HistogramSeries {
  readonly labels: Labels;
  readonly #bounds: readonly number[];
  /** Observations per bucket (not cumulative); the last slot is above every bound. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(labels: Labels, bounds: readonly number[]) {
    this.labels = labels;
    this.#bounds = bounds;
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    if (!Number.isFinite(value) || value < 0) return;
    const bounds = this.#bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    this.counts[i]!++;
    this.sum += value;
    this.count++;
  }
}

export class HistogramFamily extends Family<HistogramSeries> {
  readonly type = 'histogram' as const;
  readonly bounds: readonly number[];

  constructor(registry: Registry<RegistryContentType>, name: string, help: string, labelNames: readonly string[], bounds: readonly number[]) {
    super(registry, name, help, labelNames);
    this.bounds = [...bounds].sort((a, b) => a - b);
  }

  series(...labelValues: string[]): HistogramSeries {
    const series = new HistogramSeries(labelSet(this.labelNames, labelValues), this.bounds);
    this.all.push(series);
    return series;
  }

  get(): Collected {
    const values: Sample[] = [];
    const bucket = `${this.name}_bucket`;
    for (const s of this.all) {
      let cumulative = 0;
      this.bounds.forEach((bound, i) => {
        cumulative += s.counts[i]!;
        values.push({ metricName: bucket, labels: { ...s.labels, le: bound }, value: cumulative });
      });
      values.push({ metricName: bucket, labels: { ...s.labels, le: '+Inf' }, value: s.count });
      values.push({ metricName: `${this.name}_sum`, labels: s.labels, value: s.sum });
      values.push({ metricName: `${this.name}_count`, labels: s.labels, value: s.count });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}
