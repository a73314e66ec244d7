# syntax=docker/dockerfile:1
# The operator and webhook image: the `tollgate` command (tollgate operator | tollgate webhook | tollgate crds).
# Build from the repository root:  docker build -t ghcr.io/tollgate/tollgate:0.1.0 .
# Compiled once with tsc (npm run build) so start-up does not pay for type stripping.

ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json tsconfig.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY sidecar ./sidecar
COPY operator ./operator
COPY webhook ./webhook
COPY crds ./crds
RUN npx tsc -p tsconfig.json --noEmit false --outDir dist

FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: neither the operator nor the webhook loads better-sqlite3.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force

FROM ${NODE_IMAGE}
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
# cli.js dispatches to each component; the layout mirrors the repository so relative paths (proto/) hold.
COPY --from=build /src/dist/sidecar ./sidecar
COPY --from=build /src/dist/operator ./operator
COPY --from=build /src/dist/webhook ./webhook
COPY --from=build /src/dist/crds ./crds
COPY proto ./proto
# The chart's pod securityContext runs it as 65532 (non-root, read-only root filesystem).
USER 65532:65532
ENTRYPOINT ["node", "sidecar/src/cli.js"]
CMD ["--help"]
