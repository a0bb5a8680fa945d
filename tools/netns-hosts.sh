# Two "hosts" for the multi-host scripts (sourced by tools/link-cut.sh and
# tools/two-hosts-resume.sh): network namespaces dtA (10.16.0.1) and dtB (10.16.0.2) joined
# by a veth pair (vethA, vethB: down until the caller brings them up), and $1/agent, an
# Open MPI rsh agent that runs "HOST COMMAND..." in HOST's namespace, so that mpirun in dtA
# starts the rank in dtB as it would over ssh. Needs root.
#
#   netns_hosts_down          kills what runs in the namespaces and deletes them
#   netns_hosts_up WORK       makes them; returns 1 (and says nothing) when it cannot

netns_hosts_down() {
  for ns in dtA dtB; do for p in $(ip netns pids $ns 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done; done
  ip netns del dtA 2>/dev/null
  ip netns del dtB 2>/dev/null
  return 0
}

netns_hosts_up() {
  local work=$1
  netns_hosts_down
  command -v ip >/dev/null || return 1
  ip netns add dtA 2>/dev/null && ip netns add dtB 2>/dev/null || return 1
  ip link add vethA type veth peer name vethB 2>/dev/null || return 1
  ip link set vethA netns dtA && ip link set vethB netns dtB || return 1
  ip -n dtA addr add 10.16.0.1/24 dev vethA && ip -n dtB addr add 10.16.0.2/24 dev vethB || return 1
  for ns in dtA dtB; do ip -n $ns link set lo up; done
  cat >"$work/agent" <<'AGENT'
#!/bin/bash
# Open MPI's rsh agent: "HOST COMMAND..." runs COMMAND in HOST's namespace.
host=$1; shift
case "$host" in 10.16.0.1) ns=dtA ;; 10.16.0.2) ns=dtB ;; *) echo "agent: unknown host $host" >&2; exit 1 ;; esac
exec ip netns exec "$ns" bash -c "$*"
AGENT
  chmod +x "$work/agent"
}
