#!/usr/bin/env bash
# Boots a private systemd in PID + mount + cgroup namespaces, the way the design note
# systemd-in-a-namespace.md describes. One recipe for both users: Tests/SystemdTests (Testbed.swift) and
# bench/peer-systemd.sh, which copy it into their scratch directory and run it.
#
#   private-systemd.sh CGROUP SCRATCH TARGET DESCRIPTION SYSTEMD [OVERLAID…]
#
# Run it as the process that is to become the unshare process (it execs unshare, same PID). It moves itself
# into a cgroup CGROUP of its own in every hierarchy, listing each in SCRATCH/cgroups for the caller to
# remove, so the private systemd's init.scope, system.slice… are created below it instead of at the host's
# cgroup roots. Inside, PID 1 mounts a private /proc, /tmp, /run and cgroupfs (seen from the new cgroup
# namespace), makes the journal volatile and TARGET (no default dependencies, described as DESCRIPTION) the
# only target, then execs SYSTEMD: nothing from the host's boot runs. The caller finds systemd as the only
# child of this process and powers it off with SIGRTMIN+4 to that PID. Each OVERLAID directory (/usr, /etc,
# /var) gets an overlay whose upper layer is in the namespace's /run: what is installed in there (a
# package, with its dpkg database) never reaches the host's.
set -eu

if [ "${1-}" = --inner ]; then
  # PID 1 of the new namespaces until it execs systemd.
  layout=$2 target=$3 description=$4 systemd=$5
  shift 5
  mount -t proc proc /proc
  mount -t tmpfs -o mode=1777 tmpfs /tmp
  mount -t tmpfs -o mode=755 tmpfs /run
  for dir in "$@"; do
    mkdir -p "/run/overlay$dir/upper" "/run/overlay$dir/work"
    mount -t overlay overlay -o "lowerdir=$dir,upperdir=/run/overlay$dir/upper,workdir=/run/overlay$dir/work" "$dir"
  done
  case $layout in
    unified) mount -t cgroup2 cgroup2 /sys/fs/cgroup ;;
    *) mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup
       mkdir /sys/fs/cgroup/systemd
       mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd
       if [ "$layout" = hybrid ]; then
         mkdir /sys/fs/cgroup/unified
         mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified
       fi ;;
  esac
  mkdir -p /run/systemd/system /run/systemd/journald.conf.d
  printf '[Journal]\nStorage=volatile\n' > /run/systemd/journald.conf.d/volatile.conf
  printf '[Unit]\nDescription=%s\nDefaultDependencies=no\nWants=systemd-journald.socket systemd-journald.service\n' \
      "$description" > "/run/systemd/system/$target"
  exec env container=unshare "$systemd" --system "--unit=$target" --log-level=warning
fi

cg=$1 scratch=$2 target=$3 description=$4 systemd=$5
shift 5
if [ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ]; then layout=unified
elif [ "$(stat -f -c %T /sys/fs/cgroup/unified 2>/dev/null)" = cgroup2fs ]; then layout=hybrid
else layout=legacy; fi
# Read it all first: moving between cgroups changes the file while it is being read.
memberships=$(cat /proc/self/cgroup)
while IFS=: read -r _ controllers path; do
  case $controllers in
    "") case $layout in unified) dir=/sys/fs/cgroup ;; hybrid) dir=/sys/fs/cgroup/unified ;; *) continue ;; esac ;;
    name=systemd) dir=/sys/fs/cgroup/systemd ;;
    name=*|*cpuset*) continue ;;  # cpuset needs cpus/mems set up first; systemd uses none of it here
    *) dir=/sys/fs/cgroup/$controllers ;;
  esac
  [ -d "$dir" ] || continue
  target_dir=$dir${path%/}/$cg
  mkdir "$target_dir"
  echo "$target_dir" >> "$scratch/cgroups"
  echo $$ > "$target_dir/cgroup.procs"
done <<< "$memberships"
# Leave inherited descriptors alone: under Foundation's Process, closing its watch socket makes it think this
# process exited (it then blocks in waitpid on its process queue).
exec unshare --pid --fork --mount --cgroup --propagation private --kill-child=SIGRTMIN+4 \
    /bin/bash "$0" --inner "$layout" "$target" "$description" "$systemd" "$@"
