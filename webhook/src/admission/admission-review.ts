// AdmissionReview v1 as the API server sends and expects it, and the pure decision → response mapping.

import type { InjectionDecision } from '../inject.ts';

export interface AdmissionRequest {
  uid: string;
  kind: { group: string; version: string; kind: string };
  resource: { group: string; version: string; resource: string };
  subResource?: string;
  name?: string;
  namespace?: string;
  operation: 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT';
  object?: unknown;
  dryRun?: boolean;
}

export interface AdmissionReview {
  apiVersion: 'admission.k8s.io/v1';
  kind: 'AdmissionReview';
  request?: AdmissionRequest;
  response?: AdmissionResponse;
}

export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  patchType?: 'JSONPatch';
  patch?: string;
  status?: { code: number; reason?: string; message: string };
  warnings?: string[];
}

export function isAdmissionReview(body: unknown): body is AdmissionReview & { request: AdmissionRequest } {
  if (typeof body !== 'object' || body === null) return false;
  const review = body as Partial<AdmissionReview>;
  return (
    review.apiVersion === 'admission.k8s.io/v1' && review.kind === 'AdmissionReview' && typeof review.request?.uid === 'string' && typeof review.request.operation === 'string'
  );
}

export function reviewResponse(response: AdmissionResponse): AdmissionReview {
  return { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response };
}

export function allow(uid: string): AdmissionResponse {
  return { uid, allowed: true };
}

export function responseFor(uid: string, decision: InjectionDecision): AdmissionResponse {
  switch (decision.kind) {
    case 'skip':
      return allow(uid);
    case 'refuse':
      return { uid, allowed: false, status: { code: 400, reason: 'BadRequest', message: decision.message } };
    case 'inject':
      return {
        uid,
        allowed: true,
        patchType: 'JSONPatch',
        patch: Buffer.from(JSON.stringify(decision.patch)).toString('base64'),
        ...(decision.notes.length > 0 ? { warnings: decision.notes.map((n) => `tollgate: ${n}`) } : {}),
      };
  }
}
