# syntax=docker/dockerfile:1
#
# Production image of dfe-keda-shim and dfe-hunt-runner.
#   docker build -t dfe-keda-shim .
#   docker run --rm --read-only --tmpfs /tmp -p 8080:8080 -e DFE_CLICKHOUSE_URL=http://clickhouse:8123 dfe-keda-shim
#   docker run --rm -e DFE_CLICKHOUSE_URL=http://clickhouse:8123 -v "$PWD/hunts:/etc/dfe/hunts:ro" \
#     dfe-keda-shim dfe-hunt-runner materialise        # DFE_HUNTS_DIR is /etc/dfe/hunts (mount it)
#
# Node 24, the current LTS line and the Node `.ci/run` tests besides the build machines' Node 20
# (README, "Node versions").
ARG NODE_IMAGE=node:24-slim

# ---- build: compile TypeScript to dist/ ----------------------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
# `npm ci` refuses a lockfile that does not list chdb's packages for other platforms, so the
# committed lockfile is installed with `npm install`. Install scripts are skipped: the build
# only needs tsc and type definitions, not chdb's native engine.
RUN npm install --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
# Only src/ is compiled into the image (bench/ and test/ stay out of the build context).
COPY src ./src
RUN npm run build

# ---- runtime -------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS runtime
# tini is PID 1: it forwards SIGTERM to node (which then drains and exits 0) and reaps zombies.
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
# Production dependencies only, from the committed lockfile. chdb is a devDependency, so the
# image has no embedded ClickHouse; DFE_CLICKHOUSE_BACKEND=server below turns a missing server
# setting into a startup error instead of a silent in-process database.
COPY package.json package-lock.json ./
RUN npm install --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force \
 && test ! -e node_modules/chdb
# Files Node never loads at run time, about half of node_modules: source maps, type declarations
# and TypeScript sources, markdown. Licence and notice files stay. (The production-install test
# runs both programs, traced, from the pruned tree; the bench measures it: docs/performance.md.)
RUN find node_modules -type f \( -name '*.map' -o -name '*.ts' -o -name '*.mts' -o -name '*.cts' -o -name '*.md' \) \
      ! -iname 'licen[cs]e*' ! -iname 'notice*' -delete

COPY --from=build /src/dist/src ./dist/src
COPY queries ./queries
# KEDA's external scaler .proto, loaded at run time by the gRPC server (docs/api.md#grpc).
COPY proto ./proto
COPY examples ./examples
# Both programs on PATH without `npm link`: tiny wrappers that exec node on the built entry.
# The shim's sizes Node's heap from the container memory limit (node-heap: half of it).
COPY scripts/image/dfe-keda-shim scripts/image/dfe-hunt-runner scripts/image/node-heap /usr/local/bin/
RUN chmod 0755 /usr/local/bin/dfe-keda-shim /usr/local/bin/dfe-hunt-runner /usr/local/bin/node-heap

# Read-only root filesystem: nothing writes outside /tmp (mount an emptyDir there).
ENV NODE_ENV=production \
    HOME=/tmp \
    NPM_CONFIG_CACHE=/tmp/.npm \
    DFE_APP_DIR=/app \
    DFE_CLICKHOUSE_BACKEND=server \
    DFE_HUNTS_DIR=/etc/dfe/hunts \
    DFE_KEDA_SHIM_PORT=8080 \
    DFE_HUNT_RUNNER_METRICS_PORT=9464

# uid 1000 is the `node` user of the official image; numeric so runAsNonRoot can verify it.
USER 1000:1000
EXPOSE 8080 9464
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["dfe-keda-shim", "run"]
