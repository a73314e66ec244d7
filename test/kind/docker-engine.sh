#!/usr/bin/env bash
# A Docker daemon for kind, shared by the node test and `./tollgatew kind` (ADR 0112).
#
#   docker-engine.sh up       make sure a Docker daemon answers; start one in the background when none does
#   docker-engine.sh down     stop the daemon `up` started (only that one) and undo what it changed on the machine
#   docker-engine.sh status   say which daemon answers and whether this script started it
#
# `up` is idempotent. A daemon that already answers is used as it is and never stopped or reconfigured: a
# machine with a working Docker stays as it was. Otherwise Debian's docker.io is installed when missing (with
# the service kept from starting) and dockerd is started in the background, its data root in the Tollgate
# cache so images survive between runs. On a machine whose capability bounding set lacks CAP_SYS_RESOURCE,
# every privileged container (kind's nodes) fails in runc with "unable to apply caps"; there the daemon's
# default runtime is a wrapper that drops that capability from the container's spec (moby/moby#42906).
#
# `down` stops that daemon, deletes the bridges it left, restores the iptables rules and the kernel settings
# recorded before it started (Docker, kind's nodes and the kubelets inside them change global ones), and
# removes /lib/modules when Docker created it for kind's bind mount.
set -euo pipefail

cache_root="${TOLLGATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tollgate}/docker"
state=/run/tollgate-docker
# The families of kernel settings Docker, systemd in a privileged node and the kubelet are known to write.
sysctl_keys='^(net\.ipv4\.ip_forward|net\.ipv4\.conf\.(all|default)\.|net\.ipv6\.conf\.(all|default)\.forwarding|net\.bridge\.|fs\.file-max|fs\.protected_|fs\.inotify\.|kernel\.panic|kernel\.keys\.|vm\.overcommit_memory|vm\.panic_on_oom)'

log() { printf '[docker] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

daemon_answers() { timeout 10 docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

# CAP_SYS_RESOURCE is capability 24.
lacks_sys_resource() {
  local bnd
  bnd=$(awk '/^CapBnd:/ { print $2 }' /proc/self/status)
  (( (16#$bnd >> 24 & 1) == 0 ))
}

install_packages() {
  local missing=() p wanted=(iptables)
  # A dockerd from elsewhere (docker-ce, a static build) is used as it is: docker.io would conflict with it.
  command -v dockerd >/dev/null || wanted+=(docker.io)
  for p in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  command -v apt-get >/dev/null || die "no Docker daemon answers and ${missing[*]} cannot be installed without apt-get"
  log "installing Debian packages: ${missing[*]}"
  local own_policy=""
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    # The package would start its service; the daemon is started below, with its own settings, or not at all.
    printf '#!/bin/sh\n# written by tollgate for the duration of an apt-get install\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    own_policy=1
  fi
  local apt=(env DEBIAN_FRONTEND=noninteractive apt-get -qq -o DPkg::Lock::Timeout=300 -o Acquire::Retries=3)
  local rc=0
  { "${apt[@]}" install -y --no-install-recommends "${missing[@]}" >&2 ||
    { "${apt[@]}" update >&2 && "${apt[@]}" install -y --no-install-recommends "${missing[@]}" >&2; }; } || rc=$?
  [[ -z $own_policy ]] || rm -f /usr/sbin/policy-rc.d
  ((rc == 0)) || die "apt-get install ${missing[*]} failed"
}

# The runc wrapper: removes CAP_SYS_RESOURCE from the spec of every container it creates (config.json) and of
# every process it executes in one (--process, as `docker exec --privileged` passes it), then runs runc.
write_runc_wrapper() {
  local wrapper=$1 runc
  runc=$(command -v runc) || die "runc is not on PATH"
  command -v jq >/dev/null || die "jq is not on PATH (the runc wrapper edits the OCI spec with it)"
  mkdir -p "$(dirname "$wrapper")"
  cat >"$wrapper.tmp" <<EOF
#!/bin/bash
# Written by test/kind/docker-engine.sh: runc without CAP_SYS_RESOURCE, which this machine's bounding set lacks.
strip() { [ -f "\$1" ] || return 0
  jq -c 'walk(if type == "array" then map(select(. != "CAP_SYS_RESOURCE")) else . end)' "\$1" >"\$1.tg" && mv "\$1.tg" "\$1"; }
args=("\$@"); bundle=""; proc=""; cmd=""
for ((i = 0; i < \${#args[@]}; i++)); do case "\${args[\$i]}" in
  --bundle | -b) bundle="\${args[\$((i + 1))]}" ;; --bundle=*) bundle="\${args[\$i]#--bundle=}" ;;
  --process | -p) proc="\${args[\$((i + 1))]}" ;; --process=*) proc="\${args[\$i]#--process=}" ;;
  create | run | exec) [ -z "\$cmd" ] && cmd="\${args[\$i]}" ;;
esac; done
if [ "\$cmd" = create ] || [ "\$cmd" = run ]; then strip "\${bundle:-.}/config.json"; fi
if [ "\$cmd" = exec ] && [ -n "\$proc" ]; then strip "\$proc"; fi
exec $runc "\$@"
EOF
  chmod 755 "$wrapper.tmp"
  mv "$wrapper.tmp" "$wrapper"
}

record_host() {
  mkdir -p "$state"
  sysctl -a 2>/dev/null | grep -E "$sysctl_keys" >"$state/sysctl.before" || true
  ip -o link show | awk -F': ' '{ print $2 }' | sed 's/@.*//' | sort >"$state/links.before"
  if command -v iptables-save >/dev/null; then
    iptables-save >"$state/iptables.before" 2>/dev/null || true
    ip6tables-save >"$state/ip6tables.before" 2>/dev/null || true
  fi
  [[ -e /lib/modules ]] && touch "$state/lib-modules.existed"
  return 0
}

up() {
  if daemon_answers; then
    if [[ -f $state/dockerd.pid ]]; then log "the daemon this script started answers (pid $(cat "$state/dockerd.pid"))"
    else log "using the Docker daemon that answers ($(docker version --format '{{.Server.Version}}'))"; fi
    return 0
  fi
  install_packages
  command -v dockerd >/dev/null || die "dockerd is not on PATH after installing docker.io"

  # A daemon of ours that died, or was killed with its run: clean up before starting anew.
  [[ -f $state/dockerd.pid ]] && down
  record_host
  local args=(--data-root "$cache_root/data" --exec-root "$state/exec" --pidfile "$state/dockerd.pid")
  if lacks_sys_resource; then
    write_runc_wrapper "$cache_root/runc-without-sys-resource"
    args+=(--add-runtime "tollgate-runc=$cache_root/runc-without-sys-resource" --default-runtime tollgate-runc)
    log "this machine's capability bounding set lacks CAP_SYS_RESOURCE: dockerd's default runtime drops it (runc wrapper)"
  fi
  mkdir -p "$cache_root/data"
  log "starting dockerd ($(dockerd --version)), data root $cache_root/data, log $state/dockerd.log"
  (
    # The daemon outlives this script: it must not inherit its caller's descriptors (a lock, a pipe).
    for fd in /proc/$BASHPID/fd/*; do fd=${fd##*/}; ((fd > 2)) && eval "exec $fd>&-"; done
    exec setsid dockerd "${args[@]}" </dev/null >>"$state/dockerd.log" 2>&1
  ) &
  local deadline=$((SECONDS + 90))
  until daemon_answers; do
    if ! kill -0 $! 2>/dev/null; then
      tail -n 20 "$state/dockerd.log" >&2
      die "dockerd exited while starting; its log is above"
    fi
    ((SECONDS < deadline)) || { tail -n 20 "$state/dockerd.log" >&2; die "dockerd did not answer within 90 s"; }
    sleep 0.5
  done
  log "dockerd answers (pid $(cat "$state/dockerd.pid"))"
}

restore_sysctls() {
  [[ -f $state/sysctl.before ]] || return 0
  local key value now restored=0
  while IFS= read -r line; do
    key=${line%% = *}; value=${line#* = }
    now=$(sysctl -n "$key" 2>/dev/null) || continue
    [[ $now == "$value" ]] && continue
    sysctl -q -w "$key=$value" >/dev/null 2>&1 && restored=$((restored + 1))
  done <"$state/sysctl.before"
  ((restored == 0)) || log "restored $restored kernel settings"
}

restore_iptables() {
  command -v iptables-save >/dev/null || return 0
  local v save restore before
  for v in 4 6; do
    if [[ $v == 4 ]]; then save=iptables-save; restore=iptables-restore; before=$state/iptables.before
    else save=ip6tables-save; restore=ip6tables-restore; before=$state/ip6tables.before; fi
    local table
    for table in $($save 2>/dev/null | sed -n 's/^\*//p'); do
      # Empty every table Docker may have filled, then load what was there before (nothing, on most machines).
      $restore <<<"*$table"$'\n'"COMMIT" 2>/dev/null || true
      local chain
      for chain in INPUT FORWARD OUTPUT; do ${save%-save} -t "$table" -P "$chain" ACCEPT 2>/dev/null || true; done
    done
    [[ -s $before ]] && $restore <"$before"
  done
  log "iptables rules restored"
}

down() {
  local pid=""
  [[ -f $state/dockerd.pid ]] && pid=$(cat "$state/dockerd.pid")
  if [[ -z $pid ]]; then
    log "no daemon of this script's is running; nothing to stop"
    return 0
  fi
  if kill -0 "$pid" 2>/dev/null && daemon_answers; then
    # Containers first, so their bridges and the networks can go.
    local ids
    ids=$(docker ps -aq 2>/dev/null || true)
    [[ -z $ids ]] || docker rm -f -v $ids >/dev/null 2>&1 || true
    docker network prune -f >/dev/null 2>&1 || true
  fi
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    local deadline=$((SECONDS + 60))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    log "dockerd (pid $pid) stopped"
  fi
  # What dockerd leaves: its bridges and the veths of containers it did not clean up.
  if [[ -f $state/links.before ]]; then
    local link
    for link in $(ip -o link show | awk -F': ' '{ print $2 }' | sed 's/@.*//' | sort | comm -13 "$state/links.before" -); do
      case $link in docker0 | br-* | veth*) ip link del "$link" 2>/dev/null && log "removed link $link" ;; esac
    done
  fi
  restore_iptables
  restore_sysctls
  if [[ ! -f $state/lib-modules.existed && -d /lib/modules ]] && [[ -z $(ls -A /lib/modules) ]]; then
    rmdir /lib/modules && log "removed /lib/modules (Docker created it for kind's bind mount)"
  fi
  # Mounts the daemon left under its exec root and data root (a killed daemon leaves its overlays mounted).
  local m
  for m in $(awk -v a="$state/" -v b="$cache_root/data/" 'index($2, a) == 1 || index($2, b) == 1 { print $2 }' /proc/mounts | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
  rm -rf "$state"
}

status() {
  if daemon_answers; then
    local owner="not started by this script"
    [[ -f $state/dockerd.pid ]] && owner="started by this script (pid $(cat "$state/dockerd.pid"), data root $cache_root/data)"
    echo "Docker $(docker version --format '{{.Server.Version}}') answers: $owner"
  else
    echo "no Docker daemon answers"
  fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: $0 up | down | status" >&2; exit 2 ;;
esac
