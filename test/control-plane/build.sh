#!/usr/bin/env bash
# Provides etcd, kube-apiserver, kubectl and helm for the cluster tests and prints the folder holding them
# as the last line on stdout. Progress goes to stderr.
#
# `build.sh kind` provides what a kind cluster needs besides those (test/kind, ADR 0112): kubelet, kubeadm,
# kube-scheduler, kube-controller-manager and kube-proxy from the same Kubernetes release in one `go build`,
# CoreDNS, the pod sandbox (pause.go) and kind itself, into the same cache under the same lock. The node
# image reuses kube-apiserver, kubectl and etcd from the control-plane build: each binary is built once.
#
# With KUBEBUILDER_ASSETS naming a folder that holds kube-apiserver and etcd (as setup-envtest leaves it),
# those binaries are used; kubectl and helm are built when that folder lacks them. Otherwise pinned releases
# are built once with the machine's Go from the Go module proxy into a cache outside the repository.
# Idempotent: a second run finds the cache and returns in well under a second. See ADR 0100.
set -euo pipefail

K8S_VERSION=v1.34.10
ETCD_VERSION=v3.5.21
HELM_VERSION=v3.19.5
COREDNS_VERSION=v1.12.4
KIND_VERSION=v0.33.0

target=${1:-control-plane}

cache_root="${TOLLGATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tollgate}/control-plane"

log() { printf '[%s build] %s\n' "$target" "$*" >&2; }
die() { log "error: $*"; exit 1; }

has_all() {
  local dir=$1; shift
  local name
  for name in "$@"; do [[ -x "$dir/$name" ]] || return 1; done
}

# Go environment shared by every build: a static, reproducible-path, stripped binary; no toolchain download
# (the machine's Go is newer than any of these releases need); at most two compile jobs on a shared machine,
# at a lower priority than the tests that share it. The module and build caches live in the Tollgate cache
# (several GB after a cold build), so removing that folder makes a build cold; GOCACHE or GOMODCACHE set in
# the environment win.
go_env() {
  command -v go >/dev/null || die "Go is not on PATH; install Go >= 1.24 or set KUBEBUILDER_ASSETS"
  export CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off
  export GOFLAGS="${GOFLAGS:-} -p=${TOLLGATE_BUILD_JOBS:-2} -buildvcs=false"
  export GOCACHE="${GOCACHE:-$cache_root/go/build}" GOMODCACHE="${GOMODCACHE:-$cache_root/go/mod}"
  renice -n 10 $$ >/dev/null 2>&1 || true
}

new_wrapper_module() {
  local dir=$1
  mkdir -p "$dir"
  printf 'module tollgate.test/control-plane-build\n\ngo 1.24\n' >"$dir/go.mod"
}

# kube-apiserver and kubectl from k8s.io/kubernetes. Its go.mod points every staging module at ./staging/...
# with v0.0.0 requirements; the wrapper replaces each with the published v0.MINOR.PATCH release. The list is
# read from the exact release's go.mod rather than written down, so a version bump cannot miss one.
build_kubernetes() {
  local out=$1; shift
  local cmds=("$@")
  local work="$tmp/k8s-module"
  new_wrapper_module "$work"
  local gomod
  gomod=$(cd "$work" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
    sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
  [[ -f "$gomod" ]] || die "could not download the go.mod of k8s.io/kubernetes@$K8S_VERSION"
  local staging_version="v0.${K8S_VERSION#v1.}"
  local staging
  staging=$(sed -n 's/^[[:space:]]*\(k8s\.io\/[^[:space:]]*\)[[:space:]]*=>[[:space:]]*\.\/staging\/.*/\1/p' "$gomod" | sort -u)
  [[ -n "$staging" ]] || die "no staging replace lines found in $gomod"
  log "kubernetes $K8S_VERSION: $(wc -l <<<"$staging") staging modules pinned to $staging_version"
  {
    printf '\nreplace (\n'
    local m
    for m in $staging; do printf '\t%s => %s %s\n' "$m" "$m" "$staging_version"; done
    printf ')\n'
  } >>"$work/go.mod"

  local pkgs=() c
  for c in "${cmds[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  log "kubernetes $K8S_VERSION: resolving modules (first run downloads several hundred MB)"
  (cd "$work" && go get "${pkgs[@]/%/@$K8S_VERSION}" >&2)

  local minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local ldflags="-s -w"
  local pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  log "kubernetes $K8S_VERSION: compiling ${cmds[*]} (many minutes on a cold cache)"
  (cd "$work" && go build -mod=mod -trimpath -ldflags "$ldflags" -o "$out/" "${pkgs[@]}")
}

# etcd's main package is go.etcd.io/etcd/server/v3; its own go.mod has replace directives, so it is built
# from a wrapper module that takes the published sibling modules.
build_etcd() {
  local out=$1
  local work="$tmp/etcd-module"
  new_wrapper_module "$work"
  log "etcd $ETCD_VERSION: resolving modules"
  (cd "$work" && go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2)
  log "etcd $ETCD_VERSION: compiling"
  (cd "$work" && go build -mod=mod -trimpath -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3)
}

build_helm() {
  local out=$1
  log "helm $HELM_VERSION: compiling"
  (cd "$tmp" && GOBIN="$out" go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION")
}

# CoreDNS's main package is its module root and has no replace directives.
build_coredns() {
  local out=$1
  log "coredns $COREDNS_VERSION: compiling"
  (cd "$tmp" && GOBIN="$out" go install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@$COREDNS_VERSION")
}

# kind's module root is its command; no replace directives.
build_kind() {
  local out=$1
  log "kind $KIND_VERSION: compiling"
  (cd "$tmp" && GOBIN="$out" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kind@$KIND_VERSION")
}

# The pod sandbox: a static program that holds the pod's namespaces and reaps children (pause.go).
build_pause() {
  local out=$1
  log "pause: compiling $pause_source"
  (cd "$tmp" && GO111MODULE=on go build -trimpath -ldflags "-s -w" -o "$out/pause" "$pause_source")
}

# Publishes $tmp/bin as $dest/bin with one rename, so an interrupted build never leaves a half-filled cache.
publish() {
  local dest=$1
  mv -T "$tmp/result" "$dest" 2>/dev/null || [[ -d "$dest/bin" ]] || die "could not move the build to $dest"
}

mkdir -p "$cache_root"
exec 9>"$cache_root/.build.lock"
# Two test runs starting together on a cold cache must not both spend ten minutes building.
if ! flock -n 9; then
  log "another build holds $cache_root/.build.lock; waiting"
  flock 9
fi
# Builds are serialised by the lock, so any temporary folder still here is from a build that was killed.
for stale in "$cache_root"/.tmp-*; do
  [[ -e "$stale" ]] || continue
  log "removing $stale, left by an interrupted build"
  chmod -R u+w "$stale" 2>/dev/null || true
  rm -rf "$stale"
done

tmp=""
cleanup() {
  if [[ -n "$tmp" ]]; then chmod -R u+w "$tmp" 2>/dev/null || true; rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ $target == kind ]]; then
  pause_source="$(cd "$(dirname "${BASH_SOURCE[0]}")/../kind" && pwd)/pause.go"
  kind_binaries=(kubelet kubeadm kube-scheduler kube-controller-manager kube-proxy coredns kind pause)
  dest="$cache_root/kind-k8s-$K8S_VERSION-coredns-$COREDNS_VERSION-kind-$KIND_VERSION-pause-$(sha256sum "$pause_source" | cut -c1-12)"
  if ! has_all "$dest/bin" "${kind_binaries[@]}"; then
    go_env
    log "building ${kind_binaries[*]} (Kubernetes $K8S_VERSION, CoreDNS $COREDNS_VERSION, kind $KIND_VERSION) with $(go version)"
    started=$SECONDS
    tmp=$(mktemp -d "$cache_root/.tmp-XXXXXX")
    mkdir -p "$tmp/result/bin"
    build_pause "$tmp/result/bin"
    build_kind "$tmp/result/bin"
    build_coredns "$tmp/result/bin"
    build_kubernetes "$tmp/result/bin" kubelet kubeadm kube-scheduler kube-controller-manager kube-proxy
    has_all "$tmp/result/bin" "${kind_binaries[@]}" || die "build finished without every binary"
    publish "$dest"
    log "built in $((SECONDS - started)) s: $dest/bin"
  fi
  printf '%s\n' "$dest/bin"
  exit 0
fi
[[ $target == control-plane ]] || die "unknown target '$target' (expected control-plane or kind)"

if [[ -n "${KUBEBUILDER_ASSETS:-}" ]] && has_all "$KUBEBUILDER_ASSETS" kube-apiserver etcd; then
  assets=$(cd "$KUBEBUILDER_ASSETS" && pwd -P)
  log "using kube-apiserver and etcd from KUBEBUILDER_ASSETS=$assets"
  if has_all "$assets" kubectl helm; then
    printf '%s\n' "$assets"
    exit 0
  fi
  # A folder of links: the envtest binaries beside a kubectl and helm of our own.
  key=$(printf '%s' "$assets" | sha256sum | cut -c1-16)
  dest="$cache_root/assets-$key-k8s-$K8S_VERSION-helm-$HELM_VERSION"
  if ! has_all "$dest/bin" kube-apiserver etcd kubectl helm; then
    go_env
    tmp=$(mktemp -d "$cache_root/.tmp-XXXXXX")
    mkdir -p "$tmp/result/bin"
    for name in kube-apiserver etcd kubectl helm; do
      [[ -x "$assets/$name" ]] && ln -s "$assets/$name" "$tmp/result/bin/$name"
    done
    [[ -e "$tmp/result/bin/kubectl" ]] || build_kubernetes "$tmp/result/bin" kubectl
    [[ -e "$tmp/result/bin/helm" ]] || build_helm "$tmp/result/bin"
    rm -rf "$dest"
    publish "$dest"
  fi
  printf '%s\n' "$dest/bin"
  exit 0
fi

dest="$cache_root/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-helm-$HELM_VERSION"
if has_all "$dest/bin" kube-apiserver kubectl etcd helm; then
  log "cached: $dest/bin"
  printf '%s\n' "$dest/bin"
  exit 0
fi

go_env
log "building kube-apiserver, kubectl $K8S_VERSION, etcd $ETCD_VERSION, helm $HELM_VERSION with $(go version)"
started=$SECONDS
tmp=$(mktemp -d "$cache_root/.tmp-XXXXXX")
mkdir -p "$tmp/result/bin"
build_etcd "$tmp/result/bin"
build_helm "$tmp/result/bin"
build_kubernetes "$tmp/result/bin" kube-apiserver kubectl
has_all "$tmp/result/bin" kube-apiserver kubectl etcd helm || die "build finished without every binary"
publish "$dest"
log "built in $((SECONDS - started)) s: $dest/bin"
printf '%s\n' "$dest/bin"
