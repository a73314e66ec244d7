#!/usr/bin/env bash
# Provides promql-check (main.go beside this script: Prometheus's PromQL parser behind a line-per-expression
# stdin) and prints its path as the last stdout line. Built once with the machine's Go from the Go module
# proxy into the same cache as the control plane, keyed by the source, under a lock like test/control-plane.
set -euo pipefail

PROMETHEUS_VERSION=v0.316.0

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${TOLLGATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tollgate}/promql-check"
log() { printf '[promql-check build] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

key=$( (printf '%s\n' "$PROMETHEUS_VERSION"; cat "$here/main.go") | sha256sum | cut -c1-16)
binary="$cache_root/promql-check-$key"
if [[ -x "$binary" ]]; then
  printf '%s\n' "$binary"
  exit 0
fi
mkdir -p "$cache_root"
exec 9>"$cache_root/.build.lock"
flock 9
if [[ -x "$binary" ]]; then
  printf '%s\n' "$binary"
  exit 0
fi
command -v go >/dev/null || die "Go is not on PATH; install Go >= 1.24"
export CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off
export GOFLAGS="${GOFLAGS:-} -p=${TOLLGATE_BUILD_JOBS:-2} -buildvcs=false"
tmp=$(mktemp -d "$cache_root/.tmp-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp "$here/main.go" "$tmp/"
printf 'module tollgate.test/promql-check\n\ngo 1.24\n' >"$tmp/go.mod"
log "building with the PromQL parser of prometheus $PROMETHEUS_VERSION (about a minute on a cold cache)"
(cd "$tmp" && go get "github.com/prometheus/prometheus/promql/parser@$PROMETHEUS_VERSION" >&2 && go build -trimpath -ldflags "-s -w" -o "$tmp/promql-check" .)
mv "$tmp/promql-check" "$binary"
printf '%s\n' "$binary"
