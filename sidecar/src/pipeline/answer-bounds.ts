// How much of an upstream answer the engine reads, and for how long, in one place (ADR 1700): an answer read
// whole to translate it, an error read whole to reshape it, and what is read after the caller left (ADR 1305).

/** Largest upstream body read whole (a non-streamed completion, an error): beyond it the call fails with 502. */
export const MAX_TRANSLATED_BODY_BYTES = 32 * 1024 * 1024;

/** Largest upstream error body read whole to answer in the caller's error shape. */
export const MAX_ERROR_BODY_BYTES = 1024 * 1024;

/** How long and how far the upstream is read after the caller left, for the usage it owes (ADR 1305). */
export const READ_AFTER_LEAVING_MS = 10_000;
export const READ_AFTER_LEAVING_BYTES = 2 * 1024 * 1024;
