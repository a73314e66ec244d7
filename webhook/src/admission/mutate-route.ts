// POST /mutate: AdmissionReview v1 in, AdmissionReview v1 out. A review we cannot judge (namespace lookup
// failed, no operator CA yet) gets a 500, so the API server applies the configured failurePolicy instead of
// us guessing it.

import type { FastifyPluginAsync } from 'fastify';
import { isAdmissionReview, reviewResponse } from './admission-review.ts';
import { admitPod, type PodAdmissionDeps } from './pod-admission.ts';

export const mutateRoute: FastifyPluginAsync<{ admission: PodAdmissionDeps }> = async (app, opts) => {
  app.post('/mutate', async (request, reply) => {
    if (!isAdmissionReview(request.body)) {
      return reply.code(400).send({ error: 'expected an admission.k8s.io/v1 AdmissionReview with a request' });
    }
    const review = request.body;
    try {
      return reviewResponse(await admitPod(review.request, opts.admission));
    } catch (error) {
      request.log.error({ err: error, uid: review.request.uid }, 'admission failed');
      return reply.code(500).send({ error: (error as Error).message });
    }
  });
};
