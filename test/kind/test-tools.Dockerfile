# The node test's own image: the fake LLM upstream (test/fakes), the in-pod client the app container runs and the
# node agent that stands in for Tetragon (ADR 1606), on Tollgate's operator image (its Node and production
# dependencies are all the fakes load; proto/ is there too). Built by tollgate-images.ts from a context holding
# only test/fakes, test/kind/in-pod and the sidecar's Tetragon protocol files.
ARG TOLLGATE_IMAGE=ghcr.io/tollgate/tollgate:0.1.0
FROM ${TOLLGATE_IMAGE}
COPY test/fakes ./test/fakes
COPY test/kind/in-pod ./test/kind/in-pod
COPY sidecar/src/audit ./sidecar/src/audit
ENTRYPOINT ["node"]
CMD []
