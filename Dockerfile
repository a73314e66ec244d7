# syntax=docker/dockerfile:1
# Both Tollgate images from one build stage, and the one place that says what each image holds. Build from the
# repository root:
#   docker build --target tollgate -t ghcr.io/tollgate/tollgate:0.1.0 .          operator, webhook, crds
#   docker build --target sidecar  -t ghcr.io/tollgate/tollgate-sidecar:0.1.0 .  the injected proxy only
#   docker build --target redis    -t ghcr.io/tollgate/tollgate-redis:0.1.0 .    the chart's optional counter store
# Each image holds cmd/ (the `tollgate` command), contracts/ (what components share) and its own components;
# neither holds the other's. Both run JavaScript compiled once with tsc: type stripping at start-up would cost
# ~35 MB of RSS per process (BENCHMARKS.md), which every injected pod would pay.

ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json tsconfig.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY cmd ./cmd
COPY contracts ./contracts
COPY sidecar ./sidecar
COPY operator ./operator
COPY webhook ./webhook
COPY kube-client ./kube-client
COPY crds ./crds
RUN npx tsc -p tsconfig.json --noEmit false --outDir dist

FROM ${NODE_IMAGE} AS sidecar-deps
WORKDIR /app
COPY package.json package-lock.json ./
# better-sqlite3 ships prebuilt N-API binaries (prebuilds/, loaded without an install step); with scripts on,
# npm would run node-gyp for its binding.gyp, which needs Python and a compiler the base image does not have.
# The Kubernetes client and x509 code are not the sidecar's, nor is DuckDB (a 70 MB library for the local
# proxy's analysts; ProxyConfig does not offer it, ADR 0402). `npm uninstall` reinstalls devDependencies
# unless told --omit=dev as well.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm uninstall --no-save --omit=dev --ignore-scripts @kubernetes/client-node @peculiar/x509 reflect-metadata @duckdb/node-api \
 && npm cache clean --force

FROM ${NODE_IMAGE} AS control-deps
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: neither the operator nor the webhook loads better-sqlite3. Nor DuckDB: out.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm uninstall --no-save --omit=dev --ignore-scripts @duckdb/node-api \
 && npm cache clean --force

# The injected sidecar: the compiled proxy, the config-push proto, the management UI, its runtime dependencies.
# Memory flags (ADR 0003, measured with bench/side-by-side.ts, which reads them from here): a 4 MB semi-space (ADR
# 0006: about a fifth less CPU per call than 2 MB at 16 connections, for ~3 MiB more private memory); one V8
# helper thread; the old generation capped at 64 MB so that V8 collects instead of growing towards a limit sized for
# the whole machine; glibc returning blocks of 32 KB and more (JIT compiler zones) to the system when they are
# freed rather than keeping them; no Maglev, V8's middle JIT tier (ADR 0005: ~12 MiB less private memory under
# load for ~4 % more CPU per call) and no page promotion (ADR 0006: a scavenge copies a page's live objects
# instead of moving the whole page to the old generation, about a tenth less CPU per call): V8 flags node
# refuses in NODE_OPTIONS, so they are on the ENTRYPOINT. State and spans live in the volumes the webhook
# mounts; UID/GID 65532 matches the injected securityContext (runAsNonRoot, readOnlyRootFilesystem).
FROM ${NODE_IMAGE} AS sidecar
ENV NODE_ENV=production \
    NODE_OPTIONS="--max-semi-space-size=4 --max-old-space-size=64 --v8-pool-size=1" \
    MALLOC_MMAP_THRESHOLD_=32768
WORKDIR /app
COPY --from=sidecar-deps /app/node_modules ./node_modules
COPY package.json ./
COPY --from=build /src/dist/cmd ./cmd
COPY --from=build /src/dist/contracts ./contracts
COPY --from=build /src/dist/sidecar/src ./sidecar/src
# the management UI's static files (GET /_local/); its chart library comes with node_modules
COPY sidecar/ui ./sidecar/ui
COPY proto ./proto
USER 65532:65532
ENTRYPOINT ["node", "--no-maglev", "--no-page-promotion", "cmd/tollgate.js"]
CMD ["proxy"]

# The counter store the chart can run (budgets.redis.deploy, ADR 1310): Debian's redis-server on the Debian base
# every image here starts from (the kind tests build that base locally where no registry answers), as UID 65532
# like the others. Its settings (append-only file, fsync before answering) are the chart's arguments.
FROM ${NODE_IMAGE} AS redis
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /data
USER 65532:65532
ENTRYPOINT ["redis-server"]
CMD ["--dir", "/data", "--appendonly", "yes", "--appendfsync", "always", "--save", ""]

# The operator and webhook image (the default target). The layout mirrors the repository so relative paths
# (proto/) hold; the chart runs it as 65532 with a read-only root filesystem.
FROM ${NODE_IMAGE} AS tollgate
ENV NODE_ENV=production
WORKDIR /app
COPY --from=control-deps /app/node_modules ./node_modules
COPY package.json ./
COPY --from=build /src/dist/cmd ./cmd
COPY --from=build /src/dist/contracts ./contracts
COPY --from=build /src/dist/operator ./operator
COPY --from=build /src/dist/webhook ./webhook
COPY --from=build /src/dist/kube-client ./kube-client
COPY --from=build /src/dist/crds ./crds
COPY proto ./proto
USER 65532:65532
ENTRYPOINT ["node", "cmd/tollgate.js"]
CMD ["--help"]
