#!/usr/bin/env bash
# Provides an OpenTelemetry Collector for the OTLP tests and prints its path as the last stdout line.
# Progress goes to stderr.
#
# The collector is assembled the way the project's own distributions are: the OpenTelemetry Collector
# Builder (ocb, go.opentelemetry.io/collector/cmd/builder) reads manifest.yaml beside this script and compiles
# a collector from the Go module proxy with the machine's Go. The components are the ones the tests need:
# the OTLP receiver (gRPC and HTTP/protobuf), the OTLP/HTTP exporter (set to JSON encoding, it hands what the
# collector decoded to the test's own HTTP listener) and the debug exporter. Core components only: the contrib
# file exporter's test dependencies are not all on the Go module proxy. The build is cached outside the repository, keyed by the
# manifest's hash, and serialised by a lock so two cold runs do not both compile. ADR 1502.
#
# With OTELCOL_BIN naming an executable collector that has the same components, that one is used instead.
set -euo pipefail

BUILDER_VERSION=v0.165.0

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${TOLLGATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tollgate}/otel-collector"
log() { printf '[otel-collector build] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if [[ -n "${OTELCOL_BIN:-}" ]]; then
  [[ -x "$OTELCOL_BIN" ]] || die "OTELCOL_BIN=$OTELCOL_BIN is not executable"
  printf '%s\n' "$OTELCOL_BIN"
  exit 0
fi

key=$( (printf '%s\n' "$BUILDER_VERSION"; cat "$here/manifest.yaml") | sha256sum | cut -c1-16)
dest="$cache_root/otelcol-$key"
binary="$dest/otelcol-tollgate-test"
if [[ -x "$binary" ]]; then
  printf '%s\n' "$binary"
  exit 0
fi

mkdir -p "$cache_root"
exec 9>"$cache_root/.build.lock"
if ! flock -n 9; then
  log "another build holds $cache_root/.build.lock; waiting"
  flock 9
fi
if [[ -x "$binary" ]]; then
  printf '%s\n' "$binary"
  exit 0
fi
# Builds are serialised by the lock, so a temporary folder still here is from a build that was killed.
for stale in "$cache_root"/.tmp-*; do
  [[ -e "$stale" ]] || continue
  log "removing $stale, left by an interrupted build"
  chmod -R u+w "$stale" 2>/dev/null || true
  rm -rf "$stale"
done

command -v go >/dev/null || die "Go is not on PATH; install Go >= 1.24 or set OTELCOL_BIN"
export CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off
export GOFLAGS="${GOFLAGS:-} -p=${TOLLGATE_BUILD_JOBS:-2} -buildvcs=false"

tmp=$(mktemp -d "$cache_root/.tmp-XXXXXX")
cleanup() { chmod -R u+w "$tmp" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

started=$SECONDS
log "building the collector builder $BUILDER_VERSION with $(go version)"
GOBIN="$tmp/tools" go install -trimpath "go.opentelemetry.io/collector/cmd/builder@$BUILDER_VERSION"
log "compiling the collector from manifest.yaml (a few minutes on a cold cache)"
sed "s|@OUTPUT@|$tmp/result|" "$here/manifest.yaml" >"$tmp/manifest.yaml"
(cd "$tmp" && "$tmp/tools/builder" --config "$tmp/manifest.yaml" >&2)
[[ -x "$tmp/result/otelcol-tollgate-test" ]] || die "the builder finished without $tmp/result/otelcol-tollgate-test"
mkdir -p "$dest.new" && mv "$tmp/result/otelcol-tollgate-test" "$dest.new/" && rm -rf "$dest" && mv -T "$dest.new" "$dest"
log "built in $((SECONDS - started)) s: $binary"
printf '%s\n' "$binary"
