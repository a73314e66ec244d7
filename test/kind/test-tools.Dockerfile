# The node test's own image: the fake LLM upstream (test/fakes) and the in-pod client the app container runs,
# on Tollgate's operator image (its Node and production dependencies are all the fakes load). Built by
# tollgate-images.ts from a context holding only test/fakes and test/kind/in-pod.
ARG TOLLGATE_IMAGE=ghcr.io/tollgate/tollgate:0.1.0
FROM ${TOLLGATE_IMAGE}
COPY test/fakes ./test/fakes
COPY test/kind/in-pod ./test/kind/in-pod
ENTRYPOINT ["node"]
CMD []
