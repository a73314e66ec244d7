# syntax=docker/dockerfile:1
# The operator and webhook image: the `tollgate` command (tollgate operator | tollgate webhook | tollgate crds).
# Build from the repository root:  docker build -t ghcr.io/tollgate/tollgate:0.1.0 .
# Node 24 runs the TypeScript sources directly (type stripping), so there is no compile step.

ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: neither the operator nor the webhook loads better-sqlite3, so its native build is skipped.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force

FROM ${NODE_IMAGE}
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
# cli.ts dispatches to each component; operator and webhook share the sidecar's config and route types.
COPY sidecar/src ./sidecar/src
COPY operator/src ./operator/src
COPY webhook/src ./webhook/src
COPY crds ./crds
COPY proto ./proto
RUN find . -path ./node_modules -prune -o -name '*.test.ts' -print -delete >/dev/null
# The chart's pod securityContext runs it as 65532 (non-root, read-only root filesystem).
USER 65532:65532
ENTRYPOINT ["node", "sidecar/src/cli.ts"]
CMD ["--help"]
