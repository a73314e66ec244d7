// The refusal of an images request (routes/openai-images.ts, the provider image translators): what is wrong, and the field.

/** A request the image API cannot take, or that the proxy cannot meter: what is wrong, and the field. */
export class ImageRequestError extends Error {
  readonly param: string | null;
  constructor(message: string, param: string | null) {
    super(message);
    this.param = param;
  }
}
