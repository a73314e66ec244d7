// Library errors carry request configs and responses (GaxiosError keeps the request headers, which can hold
// a bearer token). Only these fields reach logs.

export interface ErrorSummary {
  type: string;
  message: string;
  code?: string;
  status?: number;
}

export function summarizeError(error: unknown): ErrorSummary {
  if (!(error instanceof Error)) return { type: typeof error, message: String(error) };
  const summary: ErrorSummary = { type: error.name, message: error.message };
  const { code, status, response } = error as Error & {
    code?: unknown;
    status?: unknown;
    response?: { status?: unknown };
  };
  if (typeof code === 'string' || typeof code === 'number') summary.code = String(code);
  const httpStatus = typeof status === 'number' ? status : response?.status;
  if (typeof httpStatus === 'number') summary.status = httpStatus;
  return summary;
}
