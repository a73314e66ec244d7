// JSON.parse keeps the last of two equal keys, so `{"pricing":…,"pricing":…}` applies whichever came second
// and the first is silently ignored. Config input refuses that, as the YAML file does (uniqueKeys): a body
// that says one thing twice is refused with the place it says it, and nothing is applied.

export class DuplicateKeyError extends SyntaxError {
  /** Where the object with the repeated key sits, e.g. `pricing.models[0]`; empty for the top level. */
  readonly path: string;
  readonly key: string;
  constructor(path: string, key: string) {
    super(`${path === '' ? 'the body' : path} has the key ${JSON.stringify(key)} twice; each key may appear once`);
    this.name = 'DuplicateKeyError';
    this.path = path;
    this.key = key;
  }
}

/** JSON.parse, refusing an object that repeats a key (keys compared as decoded, so "a" and "\u0061" are one). */
export function parseJsonWithUniqueKeys(text: string): unknown {
  const value: unknown = JSON.parse(text);
  // Only objects can repeat a key; a scalar or a flat array needs no second pass.
  if (text.includes('{')) checkUniqueKeys(text);
  return value;
}

interface ObjectFrame {
  kind: 'object';
  path: string;
  keys: Set<string>;
  expectKey: boolean;
  key: string;
}

interface ArrayFrame {
  kind: 'array';
  path: string;
  index: number;
}

/** Walks text that JSON.parse accepted, tracking each object's keys and the path to it. */
function checkUniqueKeys(text: string): void {
  const stack: (ObjectFrame | ArrayFrame)[] = [];
  const childPath = (): string => {
    const parent = stack.at(-1);
    if (parent === undefined) return '';
    if (parent.kind === 'array') return `${parent.path}[${parent.index}]`;
    return parent.path === '' ? parent.key : `${parent.path}.${parent.key}`;
  };
  for (let i = 0; i < text.length; i++) {
    const char = text[i];
    if (char === '{') {
      stack.push({ kind: 'object', path: childPath(), keys: new Set(), expectKey: true, key: '' });
    } else if (char === '[') {
      stack.push({ kind: 'array', path: childPath(), index: 0 });
    } else if (char === '}' || char === ']') {
      stack.pop();
    } else if (char === ',') {
      const top = stack.at(-1);
      if (top?.kind === 'object') top.expectKey = true;
      else if (top?.kind === 'array') top.index++;
    } else if (char === '"') {
      const end = stringEnd(text, i);
      const top = stack.at(-1);
      if (top?.kind === 'object' && top.expectKey) {
        const key = JSON.parse(text.slice(i, end + 1)) as string;
        if (top.keys.has(key)) throw new DuplicateKeyError(top.path, key);
        top.keys.add(key);
        top.key = key;
        top.expectKey = false;
      }
      i = end;
    }
  }
}

/** Index of the quote that closes the string opening at `start`. */
function stringEnd(text: string, start: number): number {
  for (let i = start + 1; i < text.length; i++) {
    const char = text[i];
    if (char === '\\') i++;
    else if (char === '"') return i;
  }
  return text.length - 1;
}
