// Kubernetes resource quantities ("100m", "128Mi", "0.5", "1e3"), parsed only far enough to validate an
// override and compare it with the default limit. The API server re-parses and canonicalises them anyway.

const QUANTITY = /^(\d+(?:\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$/;

const SUFFIX: Record<string, number> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** The quantity's value in base units (cores, bytes), or undefined when it is not a valid quantity. */
export function parseQuantity(text: string): number | undefined {
  const match = QUANTITY.exec(text.trim() === text ? text : '');
  if (!match) return undefined;
  const [, digits, suffix = ''] = match;
  const base = Number(digits);
  const multiplier = /^[eE]/.test(suffix) ? 10 ** Number(suffix.slice(1)) : SUFFIX[suffix];
  if (multiplier === undefined || !Number.isFinite(base)) return undefined;
  return base * multiplier;
}
