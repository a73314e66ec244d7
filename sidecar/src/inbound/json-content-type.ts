// A body the engine reads as JSON must say it is JSON. A browser can send text/plain, form-encoded or
// multipart bodies to any address without asking first (a CORS "simple" request); application/json needs a
// preflight, which the engine never grants to an origin it does not allow. So requiring the JSON media type
// where a JSON body is read keeps a web page from posting one blind, even one without an Origin header.

/** application/json or application/<anything>+json, any parameters (charset). */
export const JSON_MEDIA_TYPE = /^application\/(?:[\w.+-]*\+)?json(?=\s*(?:;|$))/i;

export function isJsonContentType(contentType: string | undefined): boolean {
  return contentType !== undefined && JSON_MEDIA_TYPE.test(contentType.trimStart());
}

/** The refusal for a JSON body sent under another (or no) content type. */
export function notJsonMessage(contentType: string | undefined): string {
  const got = contentType === undefined ? 'no Content-Type' : `Content-Type ${JSON.stringify(contentType)}`;
  return `the request body must be JSON, sent with Content-Type: application/json (got ${got})`;
}
