/** A config value that cannot be used. The message names the field, e.g. `upstreams.beta.baseUrl must be an http(s) URL`. */
export class ConfigError extends Error {
  readonly code = 'invalid_config';
  readonly field: string;
  constructor(field: string, problem: string) {
    super(`${field} ${problem}`);
    this.name = 'ConfigError';
    this.field = field;
  }
}
