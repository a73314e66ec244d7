// Reads the YAML config file into a validated patch. A syntax error names the line; a bad value names the
// field; either stops start-up before anything listens.

import { readFileSync } from 'node:fs';
import { parseDocument } from 'yaml';
import { ConfigError } from '../../../contracts/config-error.ts';
import { parseRuntimeConfigPatch, type RuntimeConfigPatch } from '../../../contracts/config-schema.ts';

export function parseConfigYaml(text: string, source: string): RuntimeConfigPatch {
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    const first = doc.errors[0]!;
    const where = first.linePos?.[0] ? ` at line ${first.linePos[0].line}, column ${first.linePos[0].col}` : '';
    throw new ConfigError(source, `is not valid YAML${where}: ${first.message.split('\n')[0]}`);
  }
  try {
    return parseRuntimeConfigPatch(doc.toJS());
  } catch (error) {
    if (error instanceof ConfigError) throw new ConfigError(`${source}: ${error.field}`, error.message.slice(error.field.length + 1));
    throw error;
  }
}

export function loadConfigFile(path: string): RuntimeConfigPatch {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ConfigError(path, `cannot be read: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  return parseConfigYaml(text, path);
}
