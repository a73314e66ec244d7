// A multipart/form-data body (RFC 7578) located, not decoded: where each part's bytes are and what its
// Content-Disposition names. The proxy reads the few fields it meters by (an audio upload's model and
// response_format) and forwards the body's own bytes, so an upload is never re-encoded on its way (ADR 0911).

/** One part: its form name, its file name when it is a file, and where its content lies in the body. */
export interface FormPart {
  name: string;
  filename: string | null;
  /** Offsets of the part's content in the body: [start, end). */
  start: number;
  end: number;
}

/** A body that is not the multipart form its Content-Type says, with what is wrong. */
export class MultipartProblem extends Error {}

/** More parts than any upload a metered endpoint takes has; a form of thousands of parts is refused unread. */
const MAX_PARTS = 256;
/** The longest part header block read (Content-Disposition and Content-Type fit in far less). */
const MAX_HEADER_BYTES = 8 * 1024;

const CRLF = Buffer.from('\r\n');
const HEADERS_END = Buffer.from('\r\n\r\n');

/** The boundary a multipart/form-data Content-Type names; null when the type is another or names none. */
export function formBoundary(contentType: string | undefined): string | null {
  if (contentType === undefined || !/^\s*multipart\/form-data\s*(;|$)/i.test(contentType)) return null;
  const match = /;\s*boundary\s*=\s*(?:"([^"]{1,70})"|([^\s;"]{1,70}))/i.exec(contentType);
  return match?.[1] ?? match?.[2] ?? null;
}

/** The parts of a multipart/form-data body, in order. Throws MultipartProblem when it is not one. */
export function formParts(body: Buffer, boundary: string): FormPart[] {
  const delimiter = Buffer.from(`--${boundary}`);
  const next = Buffer.from(`\r\n--${boundary}`);
  // The first delimiter may follow a preamble, which is ignored (RFC 2046 §5.1.1).
  let at = body.subarray(0, delimiter.length).equals(delimiter) ? 0 : body.indexOf(next);
  if (at === -1) throw new MultipartProblem(`the body has no part delimited by the boundary ${JSON.stringify(boundary)} its Content-Type names`);
  at += at === 0 ? delimiter.length : next.length;
  const parts: FormPart[] = [];
  for (;;) {
    if (body[at] === 0x2d && body[at + 1] === 0x2d) return parts; // "--": the close delimiter
    if (!body.subarray(at, at + 2).equals(CRLF)) throw new MultipartProblem('a boundary delimiter is not followed by a line break');
    const headersStart = at + 2;
    const headersEnd = body.indexOf(HEADERS_END, headersStart);
    if (headersEnd === -1 || headersEnd - headersStart > MAX_HEADER_BYTES) throw new MultipartProblem(`part ${parts.length + 1} has no complete header block`);
    const end = body.indexOf(next, headersEnd + HEADERS_END.length);
    if (end === -1) throw new MultipartProblem(`part ${parts.length + 1} is not closed by the boundary: the body ends early`);
    parts.push({ ...disposition(body.toString('latin1', headersStart, headersEnd), parts.length + 1), start: headersEnd + HEADERS_END.length, end });
    if (parts.length > MAX_PARTS) throw new MultipartProblem(`the form has more than ${MAX_PARTS} parts`);
    at = end + next.length;
  }
}

/** The form name and file name of a part's Content-Disposition header. */
function disposition(headers: string, index: number): { name: string; filename: string | null } {
  const line = headers.split('\r\n').find((header) => /^content-disposition\s*:/i.test(header));
  if (line === undefined) throw new MultipartProblem(`part ${index} has no Content-Disposition header`);
  const parameters = dispositionParameters(line.slice(line.indexOf(':') + 1), index);
  const name = parameters.get('name');
  if (name === undefined) throw new MultipartProblem(`part ${index}'s Content-Disposition names no form field (name=)`);
  return { name, filename: parameters.get('filename') ?? null };
}

/** One `; key=value` parameter, the value a token or a quoted string with backslash escapes (RFC 7578 §4.2). */
const PARAMETER = /\s*;\s*([^\s=;"]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]*))\s*/y;
const REST_BLANK = /\s*;?\s*$/y;

/**
 * The parameters of a Content-Disposition value, read in order as a multipart parser reads them: a name= inside
 * another parameter's quoted value is that value's text, never the part's name, or the proxy would meter one
 * field while the server reads another. A parameter given twice, or text that is not a parameter, is refused.
 */
function dispositionParameters(value: string, index: number): Map<string, string> {
  const parameters = new Map<string, string>();
  const first = value.indexOf(';');
  if (first === -1) return parameters;
  PARAMETER.lastIndex = first;
  for (;;) {
    const at = PARAMETER.lastIndex;
    // What is left is blank (or a trailing `;`): read to the end. Sticky, so the header is not copied each time.
    REST_BLANK.lastIndex = at;
    if (REST_BLANK.test(value)) return parameters;
    const match = PARAMETER.exec(value);
    if (match === null) throw new MultipartProblem(`part ${index}'s Content-Disposition cannot be read from ${JSON.stringify(value.slice(at, at + 40))}`);
    const key = match[1]!.toLowerCase();
    if (parameters.has(key)) throw new MultipartProblem(`part ${index}'s Content-Disposition has ${key}= more than once`);
    // Header bytes were read as latin1; names and file names are UTF-8 (RFC 7578 §5.1).
    const text = match[2] !== undefined ? match[2].replace(/\\(.)/g, '$1') : match[3]!;
    parameters.set(key, Buffer.from(text, 'latin1').toString('utf8'));
  }
}

/** A one-value field sent more than once: which value the provider reads is its own choice, not the proxy's. */
export class RepeatedFormField extends MultipartProblem {
  readonly field: string;
  constructor(field: string) {
    super(`the form has more than one ${field} field: send it once`);
    this.field = field;
  }
}

/**
 * A text field's value, or undefined when the form has no part of that name. Throws RepeatedFormField when it has
 * several: the fields read here (model, size, response_format, …) set the bill, and a server that keeps the last
 * value would make what the first did not price.
 */
export function formField(body: Buffer, parts: readonly FormPart[], name: string): string | undefined {
  const named = parts.filter((candidate) => candidate.name === name && candidate.filename === null);
  if (named.length > 1) throw new RepeatedFormField(name);
  const part = named[0];
  return part === undefined ? undefined : body.toString('utf8', part.start, part.end);
}

/**
 * Whether a form's boolean field may be read as true by the server: anything but absent, `false` or `0` (any
 * case). Servers differ in what they take for true (`true`, `True`, `1`, `on`), and the proxy must not meter as
 * off what the provider takes as on.
 */
export function mayBeTrue(value: string | undefined): boolean {
  return value !== undefined && !/^(false|0)$/i.test(value.trim());
}
