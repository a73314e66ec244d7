# syntax=docker/dockerfile:1
# The real-node test's own image: the fake LLM upstream (test/fakes) and the in-pod client the app container
# runs, on the same Node base as Tollgate's images. Build context: the repository root. Its ignore file is
# test-tools.Dockerfile.dockerignore (BuildKit and the node test's assembler both read it).
ARG NODE_IMAGE=node:24-bookworm-slim

# The same instructions as the Dockerfile's control-deps stage, so both share one cached result.
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: the fakes load no native addon.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force

FROM ${NODE_IMAGE} AS test-tools
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY test/fakes ./test/fakes
COPY test/cluster-node/in-pod ./test/cluster-node/in-pod
USER 65532:65532
ENTRYPOINT ["node"]
