/** A price entry (config file, POST /_local/api/config, ProxyConfig) that cannot be used; the message names the field. */
export class PriceEntryError extends Error {
  readonly code = 'invalid_price_entry';
  /** Path of the offending field, e.g. `pricing.models[2].input_per_million`. */
  readonly field: string;

  constructor(field: string, problem: string) {
    super(`${field} ${problem}`);
    this.name = 'PriceEntryError';
    this.field = field;
  }
}
