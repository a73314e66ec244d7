// Finds one key's value in JSON text that may be cut at either end (the kept head or tail of a large body).
// A key is recognised by `"name"` followed by `:`: inside a JSON string every quote is escaped, so that
// sequence only occurs as a real key. The value is delimited with string-aware bracket matching and parsed.

const MAX_CANDIDATES = 64;

/** The value of the last (fromEnd) or first occurrence of `key` whose value is complete and valid JSON. */
export function findJsonValue(text: string, key: string, fromEnd: boolean): unknown {
  const needle = `"${key}"`;
  let at = fromEnd ? text.lastIndexOf(needle) : text.indexOf(needle);
  for (let tries = 0; at !== -1 && tries < MAX_CANDIDATES; tries++) {
    const value = valueAfterKey(text, at + needle.length);
    if (value !== undefined) return value;
    if (fromEnd && at === 0) break;
    at = fromEnd ? text.lastIndexOf(needle, at - 1) : text.indexOf(needle, at + 1);
  }
  return undefined;
}

function isSpace(code: number): boolean {
  return code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09;
}

function valueAfterKey(text: string, from: number): unknown {
  let pos = from;
  while (pos < text.length && isSpace(text.charCodeAt(pos))) pos++;
  if (text.charCodeAt(pos) !== 0x3a) return undefined; // ':'
  pos++;
  while (pos < text.length && isSpace(text.charCodeAt(pos))) pos++;
  const start = pos;
  const end = valueEnd(text, start);
  if (end === -1) return undefined;
  try {
    return JSON.parse(text.slice(start, end));
  } catch {
    return undefined;
  }
}

/** Index just past the JSON value starting at `start`, or -1 when the text ends first. */
function valueEnd(text: string, start: number): number {
  const first = text.charCodeAt(start);
  if (Number.isNaN(first)) return -1;
  if (first !== 0x7b && first !== 0x5b && first !== 0x22) {
    let pos = start;
    while (pos < text.length) {
      const code = text.charCodeAt(pos);
      if (code === 0x2c || code === 0x7d || code === 0x5d || isSpace(code)) return pos;
      pos++;
    }
    return -1;
  }
  let depth = 0;
  let inString = false;
  for (let pos = start; pos < text.length; pos++) {
    const code = text.charCodeAt(pos);
    if (inString) {
      if (code === 0x5c) pos++;
      else if (code === 0x22) {
        inString = false;
        if (depth === 0) return pos + 1;
      }
    } else if (code === 0x22) inString = true;
    else if (code === 0x7b || code === 0x5b) depth++;
    else if (code === 0x7d || code === 0x5d) {
      depth--;
      if (depth === 0) return pos + 1;
    }
  }
  return -1;
}
