import { describe, expect, it } from 'vitest';
import { prefersOpenMetrics } from './metrics-exposition.ts';

describe('prefersOpenMetrics', () => {
  it('follows the q-values of the Accept header', () => {
    // What Prometheus 2.x/3.x sends by default: OpenMetrics first.
    expect(prefersOpenMetrics('application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2')).toBe(
      true,
    );
    // A scraper configured for the classic format first.
    expect(prefersOpenMetrics('text/plain;version=0.0.4;q=0.9,application/openmetrics-text;version=1.0.0;q=0.5')).toBe(false);
    expect(prefersOpenMetrics('application/openmetrics-text')).toBe(true);
    expect(prefersOpenMetrics('application/openmetrics-text; q=0')).toBe(false);
    expect(prefersOpenMetrics('Application/OpenMetrics-Text; version=1.0.0')).toBe(true);
  });

  it('gives text to a bare client and on a tie', () => {
    expect(prefersOpenMetrics(undefined)).toBe(false);
    expect(prefersOpenMetrics('*/*')).toBe(false);
    expect(prefersOpenMetrics('text/plain')).toBe(false);
    expect(prefersOpenMetrics('text/plain,application/openmetrics-text')).toBe(false);
  });
});
