"""A small cluster of real "hosts" on this one machine, for tests that run multi-host jobs
through Slurm or over SSH. Everything is a real Debian daemon; nothing is mocked. Needs root
and the packages of scripts/deps.sh (slurm-wlm, slurm-client, munge, openssh-server,
openssh-client, tcpdump, openmpi-bin; iproute2 and util-linux).

    from cluster import TestCluster

    with TestCluster(cpus=2, gpus=2, share=[build_dir, source_dir]) as c:
        c.run_on("gpu1", ["hostname"]).stdout                 # 'gpu1\\n'
        subprocess.run(["srun", "-p", "gpu", "-N2", "hostname"], env=c.slurm_env())
        subprocess.run(["ssh", "-F", c.ssh_config, "gpu1", "hostname"])

or c = TestCluster(...); c.start(); ...; c.stop(). stop() is also registered with atexit, and a
detached watchdog process (this file run with --watchdog) cleans up when the test process dies
without running it (SIGKILL, a ctest timeout). start() first removes what crashed earlier runs
left behind: namespaces, bridge, veths, daemons and folders with this module's names whose
owner process is gone (clusters of live processes are left alone, so test modules may run
side by side). `python3 cluster.py --cleanup` does the same by hand.

What it builds
--------------
* A Linux bridge `c.bridge` (taasbr + 4 hex digits; the run's suffix is `c.suffix`) in the
  root network namespace with address `c.bridge_addr` (10.x.y.1 or 172.x.y.1) on `c.subnet`
  (an ipaddress.IPv4Network /24 that overlaps no route or address already on the machine).
* Hosts `c.hosts`: `cpus` hosts cpu1, cpu2, ... then `gpus` hosts gpu1, gpu2, ... (the gpu
  hosts have no GPU; the name is their role). A Host has .name, .kind ("cpu" or "gpu"), .addr
  (.11, .12, ... in that order), .netns (its `ip netns` name, taas-SUFFIX-NAME) and .pid (=
  .holder_pid, its holder process: `sleep infinity` in the host's namespaces). A host is
  - a network namespace joined to the bridge by a veth (called eth0 inside; loopback up;
    default route via the bridge address; ip_forward is the machine's, 0 here, so nothing
    leaves the machine), with a sysfs of its own;
  - a UTS namespace: gethostname() is the host's name;
  - a mount namespace (private propagation) in which /tmp, /dev/shm and `c.jobs_dir` are
    private tmpfs mounts (a host cannot see what the root namespace or another host wrote
    there), /etc/hosts lists the cluster (the hosts, "ctl", and this machine's hostname as the
    bridge address) and /etc/resolv.conf is empty (no DNS query leaves a host). The folders in
    `share` are bound read-only at the same path on every host, also when they lie under
    /tmp. Everything else (/usr with mpirun and /usr/share/datasets, /etc, /run, /var/tmp,
    /root, ...) is the machine's, shared.
* A controller namespace "ctl" (`c.controller`, address .2, hostname ctl) that runs slurmctld.
  slurmctld listens on every address of its namespace and cannot be told one, so it gets a
  namespace of its own rather than the root one (no clash with a system Slurm or another
  cluster, nothing exposed on the machine's interfaces). Slurm clients (sinfo, srun, sbatch,
  salloc, squeue, scancel, scontrol) run from the root namespace with env=c.slurm_env().
* One munged (its own key; socket `c.munge_socket` under /run, which every host sees), one
  slurmd per host (`slurmd -D -N NAME -f CONF` in the host's namespaces and in a PID
  namespace of its own under a small init that reaps orphans, so that kill_slurmd takes every
  job step and task on that host with it), one sshd per host on ADDR:22.
* slurm.conf (`c.slurm_conf`): ClusterName taasSUFFIX, SlurmctldHost=ctl(ADDR), SlurmUser and
  SlurmdUser root, AuthInfo=socket=munge_socket; NodeName per host with NodeAddr, CPUs=
  `cpus_per_host` and Feature=cpu|gpu (SlurmdParameters=config_overrides: all hosts share this
  machine's cores); partitions "cpu" (Default) and "gpu", and "urgent" on the gpu hosts, whose jobs preempt
  (cancel) the others' (PreemptType=preempt/partition_prio, PreemptMode=CANCEL); no gres; select/cons_tres with
  CR_CPU (jobs and steps share nodes by CPUs); proctrack/linuxproc, task/none, no cgroup
  plugin, no accounting; MpiDefault=none (srun --mpi=pmix works); SlurmdTimeout=
  `slurmd_timeout`, MessageTimeout=5, KillWait=2, InactiveLimit=30, MinJobAge=300 (`scontrol
  show job` still knows a finished job for 5 minutes), ReturnToService=2, backfill every
  second (heterogeneous jobs are only started by the backfill scheduler); state, spool
  (per node, %n) and logs in the run's folder. Also a node named after this machine's short
  hostname with NodeAddr = bridge address and State=FUTURE (never scheduled, not shown by
  sinfo): see the quirk about srun below.
* SSH: `c.ssh_config` has a Host entry per host name (and address): HostName ADDR, User root,
  IdentityFile `c.ssh_key` (ed25519, made for the run), UserKnownHostsFile holding the hosts'
  own ed25519 keys, StrictHostKeyChecking yes, BatchMode yes, SendEnv TAAS_NPY_MEMORY_LIMIT.
  sshd: PermitRootLogin prohibit-password, PasswordAuthentication no, UsePAM no, StrictModes
  no, AcceptEnv TAAS_NPY_MEMORY_LIMIT (a test's kernel that sets it has its remote loaders
  read an .npy sample by sample, as Slurm's --export ALL does on its own), AuthorizedKeysFile
  in the run's folder, log in logs().

API
---
TestCluster(cpus=2, gpus=2, share=(), cpus_per_host=4, slurmd_timeout=6, state_root="/run")
  .start(timeout=90) / .stop() / with. start() returns once every sshd answers and every node
  is idle in sinfo (bounded waits; ClusterError with the daemons' logs otherwise; ClusterError
  at once when not root or a tool is missing). stop() kills everything (also processes the
  test started with slurm_env(), like an srun, in the root namespace) and removes
  namespaces, links and the run's folder; ClusterError if something could not be removed.
.hosts, .host(name) (also "ctl"), .cpu_hosts, .gpu_hosts, .controller
.bridge, .bridge_addr (str), .subnet (IPv4Network), .subnet_cidr ("10.x.y.0/24": Open MPI's
  *_if_include must be given the subnet, as interface names differ: the bridge in the root
  namespace, eth0 on the hosts)
.jobs_dir: one path that is a private (per-host) tmpfs on every host (empty in the root
  namespace)
.shared_dir: a writable folder (mode 1777) that the root namespace and all hosts see with the
  same files: job scripts, job output (sbatch -o), results a test reads back
.state_dir: the run's folder (/run/taas-cluster-SUFFIX: configs, keys, logs, spool)
.ssh_config, .ssh_key, .slurm_conf, .munge_socket
.run_on(host, argv, timeout=60, **popen_kwargs) -> CompletedProcess, argv run in the host's
  net+mount+uts namespaces (nsenter; text output captured unless stdout/stderr are given;
  cwd= is applied inside the host, default /).
.popen_on(host, argv, **popen_kwargs) -> Popen, the same without waiting (its pid is the
  command's own).
.ssh_argv(host, *argv) -> ["ssh", "-F", ssh_config, host, *argv]
.slurm_env(base=None) -> os.environ (or base) with SLURM_CONF and without inherited SLURM_*,
  SBATCH_*, SALLOC_*, SRUN_* variables, for Slurm clients run from the root namespace.
.slurm(*argv, timeout=60, **kw) -> CompletedProcess of a Slurm client run with slurm_env().
.node_states() -> {node: sinfo state} ("idle", "mix", "alloc", "down*", "plnd", ...);
  .wait_nodes(state="idle", names=None, timeout=60)
.kill_slurmd(host): SIGKILLs that host's slurmd and every process under it (its PID namespace:
  all job steps and their tasks there) and returns when they are gone. slurmctld sets the node
  DOWN about 17 s later with the default slurmd_timeout=6 and ends its jobs (NODE_FAIL).
  .start_slurmd(host, wait=True) starts it again; the node comes back idle by itself.
.processes_on(host) -> [(pid, cmdline)] of the live processes in that host's namespaces other
  than its daemons (holder, sshd listener, slurmd with its init): job steps (slurmstepd), job
  tasks, ssh sessions, run_on processes. Zombies are left out.
.ompi_env(base=None) -> os.environ (or base) for Open MPI: OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM),
  OMPI_MCA_oob_tcp_if_include and OMPI_MCA_btl_tcp_if_include = subnet_cidr. Use it for
  mpirun, and for srun --mpi=pmix (the ranks inherit it).
.ompi_ssh_args() -> ["--mca", "plm_rsh_agent", "ssh -F SSH_CONFIG", plus both *_if_include]:
  mpirun --host ADDR1,ADDR2 -np 2 *c.ompi_ssh_args() PROG launches over SSH from the root
  namespace.
.tcpdump(path, filter=None) -> Capture, a context manager (or .stop()) capturing every packet
  on the bridge into a pcap file (--immediate-mode, so nothing is lost at stop);
  read_pcap(path) / Capture.packets() -> [Packet(src, dst, proto, sport, dport)], its IPv4
  packets.
.logs() -> {name: text} of the daemons' logs (munged, slurmctld, slurmd-NAME, sshd-NAME,
  holders); .logs_text() as one string, for failure messages.

Quirks worth knowing
--------------------
* Names in the root namespace resolve through the machine's resolver: cpu1, gpu1 are not in
  its /etc/hosts, and looking them up sends DNS queries off the machine (mpirun --host
  gpu1,gpu2 does). Give programs run there the hosts' addresses (mpirun --host ADDR,...), or
  go through ssh -F ssh_config (it maps names itself). Slurm clients use NodeAddr and never
  look names up. Inside hosts, /etc/hosts has every name.
* Debian 12's Slurm is 22.05.8, in which slurmctld sends an srun's step messages (node failure,
  step complete, time limit) to slurm_conf_get_nodeaddr(srun's hostname), which is 0.0.0.0
  for a host that is no Slurm node (SchedMD bug 16401, fixed in 22.05.9). An srun in the root
  namespace then never learns that its node failed and hangs for ever. The FUTURE node named
  after this machine's hostname works around it: srun prints "srun: error: Node failure on
  gpu1" and "Job step aborted" and exits about 17 s after the kill, with the status of the
  tasks on the surviving nodes (143: killed) but with status 0 when every task was on failed
  nodes: look at its output (or `scontrol show job`: JobState=NODE_FAIL), not only its status.
* Open MPI: Debian's is not built with Slurm's PMI-1/PMI-2, so srun --mpi=pmi2 fails; use
  srun --mpi=pmix, mpirun inside salloc/sbatch, or mpirun over SSH.
* When an srun is killed (even SIGKILL), its helper process cancels its job within seconds;
  InactiveLimit=30 ends the allocations of clients that vanished without that.
* Only /tmp, /dev/shm and jobs_dir are per host; /run, /var/tmp, /root and the rest are the
  machine's. Working directories of jobs: the submitter's cwd when that exists on the host
  (shared folders), else /tmp of the host. A job's files are best written to shared_dir (or
  jobs_dir when they must stay on the host).
* Folders in `share` are read-only on the hosts.
* sinfo shows "plnd" for a moment on nodes the backfill scheduler planned a job on; the
  default partition is shown as "cpu*".
* The machine's net.bridge.bridge-nf-call-iptables is 1 here with no iptables rules; on a
  machine whose firewall drops forwarded traffic, hosts could not talk to each other.
* /run/sshd (sshd's privilege separation folder) is created if it is missing, and left there.
"""

import atexit
import collections
import ipaddress
import os
import random
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time

from taastest import wait_until as _wait_until

PREFIX = "taas"                 # netns taas-XXXX-NAME, bridge taasbrXXXX, veths tvXXXXhN
STATE_PREFIX = "taas-cluster-"  # state_root/taas-cluster-XXXX
SSH_PORT = 22
SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818

TOOLS = ["ip", "unshare", "nsenter", "mount", "munged", "munge", "slurmctld", "slurmd",
         "sinfo", "srun", "sbatch", "squeue", "scancel", "scontrol", "sshd", "ssh",
         "ssh-keygen", "tcpdump"]

SBIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class ClusterError(RuntimeError):
    pass


class Host:
    """One host of the cluster: .name, .kind ("cpu", "gpu" or "ctl"), .addr, .netns, .pid
    (its holder process, whose namespaces are the host's)."""

    def __init__(self, name, kind, addr, netns, veth):
        self.name = name
        self.kind = kind
        self.addr = addr
        self.netns = netns
        self.veth = veth
        self.holder = None      # Popen
        self.sshd = None        # Popen
        self.slurmd = None      # Popen of `unshare --pid --fork` whose child is the init
        self.slurmd_pidns = None
        self.slurmd_init = None  # pid of the init (pid 1 of the PID namespace)
        self.slurmd_pid = None   # pid of slurmd itself
        self.net_inode = None

    @property
    def pid(self):
        return self.holder.pid if self.holder else None

    holder_pid = pid

    def __repr__(self):
        return "Host(%s, %s, %s, pid=%s)" % (self.name, self.kind, self.addr, self.pid)


# ---------------------------------------------------------------------------------------------
# /proc helpers

def _ns_inode(pid, ns):
    try:
        link = os.readlink("/proc/%d/ns/%s" % (pid, ns))
    except OSError:
        return None
    m = re.match(r"\w+:\[(\d+)\]$", link)
    return int(m.group(1)) if m else None


def _stat_fields(pid):
    """(state, ppid, starttime) of a process, or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return rest[0], int(rest[1]), int(rest[19])


def _alive(pid):
    st = _stat_fields(pid)
    return st is not None and st[0] not in ("Z", "X")


def _cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _environ(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            return f.read()
    except OSError:
        return b""


def _pids():
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def _pids_in_ns(ns, inode):
    """Live (non-zombie) processes whose namespace `ns` has this inode."""
    if inode is None:
        return []
    return [p for p in _pids() if p != os.getpid() and _ns_inode(p, ns) == inode and _alive(p)]


def _kill_until_gone(select_pids, timeout=15.0):
    """SIGKILLs select_pids() until it is empty (bounded). Returns the pids left."""
    deadline = time.monotonic() + timeout
    while True:
        pids = select_pids()
        if not pids or time.monotonic() >= deadline:
            return pids
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def _netns_inode(name):
    try:
        return os.stat("/run/netns/" + name).st_ino
    except OSError:
        return None


def _run(argv, timeout=30, check=True, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("stdin", subprocess.DEVNULL)
    r = subprocess.run(argv, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise ClusterError("%s failed (%d): %s%s" % (" ".join(argv), r.returncode,
                                                    r.stdout or "", r.stderr or ""))
    return r


# ---------------------------------------------------------------------------------------------
# cleanup of a run by its suffix: used by stop(), by the watchdog and for leftovers

def _owner_alive(state_dir):
    try:
        with open(os.path.join(state_dir, "owner")) as f:
            pid, start = (int(x) for x in f.read().split())
    except (OSError, ValueError):
        # no owner yet: a cluster being made right now by another process, unless it is old
        try:
            return time.time() - os.stat(state_dir).st_mtime < 60
        except OSError:
            return False
    st = _stat_fields(pid)
    return st is not None and st[2] == start and st[0] not in ("Z", "X")


def _netns_names():
    try:
        return sorted(os.listdir("/run/netns"))
    except OSError:
        return []


def _links():
    r = _run(["ip", "-o", "link", "show"], check=False)
    names = []
    for line in r.stdout.splitlines():
        m = re.match(r"\d+:\s+([^:@\s]+)", line)
        if m:
            names.append(m.group(1))
    return names


def cleanup_suffix(suffix, state_root="/run"):
    """Removes everything of the run with this suffix: processes in its namespaces, processes
    that name its folder or bridge (munged, tcpdump, the watchdog but this one), namespaces,
    links and the folder. Idempotent; returns a list of problems (empty when all went)."""
    problems = []
    state_dir = os.path.join(state_root, STATE_PREFIX + suffix)
    nss = [n for n in _netns_names() if n.startswith("%s-%s-" % (PREFIX, suffix))]
    inodes = [i for i in (_netns_inode(n) for n in nss) if i is not None]
    bridge = PREFIX + "br" + suffix
    me = os.getpid()

    def ours():
        pids = set()
        for p in _pids():
            if p == me:
                continue
            if _ns_inode(p, "net") in inodes and _alive(p):
                pids.add(p)
                continue
            cmd = _cmdline(p)
            if "--watchdog" in cmd or not _alive(p):
                continue
            # munged, tcpdump, ssh clients, and Slurm clients (srun, salloc) and mpirun in the
            # root namespace that were started with slurm_env() or ompi_ssh_args()
            if state_dir in cmd or bridge in cmd or state_dir.encode() in _environ(p):
                pids.add(p)
        return sorted(pids)

    left = _kill_until_gone(ours, timeout=20)
    if left:
        problems.append("processes left: %s" % [(p, _cmdline(p)) for p in left])
    for n in nss:
        r = _run(["ip", "netns", "del", n], check=False)
        if r.returncode != 0 and os.path.exists("/run/netns/" + n):
            problems.append("ip netns del %s: %s" % (n, r.stderr.strip()))
    for link in _links():
        if link == bridge or link.startswith("tv" + suffix):
            r = _run(["ip", "link", "del", link], check=False)
            if r.returncode != 0 and link in _links():
                problems.append("ip link del %s: %s" % (link, r.stderr.strip()))
    if os.path.isdir(state_dir):
        shutil.rmtree(state_dir, ignore_errors=True)
        if os.path.exists(state_dir):
            problems.append("could not remove " + state_dir)
    return problems


def cleanup_leftovers(state_root="/run"):
    """Cleans up the runs whose owner process is gone (crashed earlier runs); leaves alone
    the clusters of processes still running."""
    suffixes = set()
    live = set()
    try:
        entries = os.listdir(state_root)
    except OSError:
        entries = []
    for e in entries:
        if e.startswith(STATE_PREFIX):
            sfx = e[len(STATE_PREFIX):]
            (live if _owner_alive(os.path.join(state_root, e)) else suffixes).add(sfx)
    for n in _netns_names():
        m = re.match(re.escape(PREFIX) + r"-([0-9a-f]{4})-", n)
        if m and m.group(1) not in live:
            suffixes.add(m.group(1))
    for link in _links():
        m = re.match(re.escape(PREFIX) + r"br([0-9a-f]{4})$", link) or \
            re.match(r"tv([0-9a-f]{4})h\d+$", link)
        if m and m.group(1) not in live:
            suffixes.add(m.group(1))
    for sfx in sorted(suffixes):
        cleanup_suffix(sfx, state_root)


# ---------------------------------------------------------------------------------------------
# pcap

Packet = collections.namedtuple("Packet", "src dst proto sport dport")


def read_pcap(path):
    """The IPv4 packets of a pcap file (Ethernet link type) as Packets (ports 0 when not TCP or
    UDP). Other frames (ARP, IPv6) are left out."""
    out = []
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        return out
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        end = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        end = ">"
    else:
        raise ValueError("%s: not a pcap file" % path)
    linktype = struct.unpack(end + "I", data[20:24])[0]
    off = 24
    while off + 16 <= len(data):
        incl = struct.unpack(end + "I", data[off + 8:off + 12])[0]
        frame = data[off + 16:off + 16 + incl]
        off += 16 + incl
        if linktype == 1:        # Ethernet
            if len(frame) < 14:
                continue
            etype = struct.unpack(">H", frame[12:14])[0]
            ip = frame[14:]
            if etype == 0x8100 and len(frame) >= 18:
                etype = struct.unpack(">H", frame[16:18])[0]
                ip = frame[18:]
            if etype != 0x0800:
                continue
        elif linktype == 113:    # Linux cooked
            if len(frame) < 16 or struct.unpack(">H", frame[14:16])[0] != 0x0800:
                continue
            ip = frame[16:]
        else:
            continue
        if len(ip) < 20 or ip[0] >> 4 != 4:
            continue
        ihl = (ip[0] & 15) * 4
        proto = ip[9]
        src = socket.inet_ntoa(ip[12:16])
        dst = socket.inet_ntoa(ip[16:20])
        sport = dport = 0
        if proto in (6, 17) and len(ip) >= ihl + 4:
            sport, dport = struct.unpack(">HH", ip[ihl:ihl + 4])
        out.append(Packet(src, dst, proto, sport, dport))
    return out


class Capture:
    """A tcpdump on the cluster's bridge writing to .path; stop() (or leaving the with block)
    ends it and waits until the file is complete."""

    def __init__(self, cluster, path, filter=None, timeout=30):
        self.path = os.path.abspath(path)
        self.cluster = cluster
        # --immediate-mode: without it, packets still in the kernel's buffer at stop() are lost
        argv = ["tcpdump", "-i", cluster.bridge, "-n", "-U", "--immediate-mode", "-s", "0",
                "-Z", "root", "-w", self.path]
        if filter:
            argv += filter.split() if isinstance(filter, str) else list(filter)
        self._err = open(self.path + ".log", "w+b")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self._err, close_fds=True)
        cluster._captures.append(self)

        def listening():
            with open(self.path + ".log", "rb") as f:
                text = f.read()
            if self.proc.poll() is not None:
                raise ClusterError("tcpdump exited (%s): %s" % (self.proc.returncode,
                                                                 text.decode(errors="replace")))
            return b"listening on" in text
        if not _wait_until(listening, timeout, 0.05):
            self.stop()
            raise ClusterError("tcpdump did not start listening within %d s" % timeout)

    def stop(self, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if not self._err.closed:
            self._err.close()
            try:
                os.unlink(self.path + ".log")
            except OSError:
                pass
        if self in self.cluster._captures:
            self.cluster._captures.remove(self)

    def packets(self):
        return read_pcap(self.path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


# ---------------------------------------------------------------------------------------------

# pid 1 of each slurmd's PID namespace: runs slurmd, reaps every orphan, forwards SIGTERM/INT/HUP
# and exits with slurmd (which makes the kernel kill whatever else is left in the namespace)
_INIT = r"""
import os, signal, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
def fwd(sig, frame):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, fwd)
while True:
    try:
        p, st = os.wait()
    except ChildProcessError:
        sys.exit(0)
    if p == pid:
        sys.exit(os.waitstatus_to_exitcode(st) & 255)
"""

# the holder of a host: in the host's netns (ip netns exec) and new mount+uts namespaces
_HOLDER = r"""
set -e
hostname "$1"
stage="$2"; jobs="$3"; hosts="$4"; resolv="$5"; shift 5
# a sysfs of this network namespace, with the machine's cgroup mounts (slurmd wants them)
mkdir -p "$stage/cgroup"
mount --rbind /sys/fs/cgroup "$stage/cgroup"
mount -t sysfs taas-sys /sys
mount --rbind "$stage/cgroup" /sys/fs/cgroup
umount -l "$stage/cgroup"
i=0
for p in "$@"; do mkdir -p "$stage/$i"; mount --rbind "$p" "$stage/$i"; i=$((i+1)); done
mount -t tmpfs -o mode=1777 taas-tmp /tmp
mount -t tmpfs -o mode=1777 taas-shm /dev/shm
mount -t tmpfs -o mode=0755 taas-jobs "$jobs"
i=0
for p in "$@"; do
  mkdir -p "$p"
  mount --rbind "$stage/$i" "$p"
  mount -o remount,bind,ro "$p"
  umount -l "$stage/$i"
  i=$((i+1))
done
mount --bind "$hosts" /etc/hosts
mount --bind "$resolv" /etc/resolv.conf
echo ready
exec sleep infinity </dev/null >/dev/null 2>&1
"""

SLURM_CONF = """\
# written by tests/lib/cluster.py
ClusterName={cluster}
SlurmctldHost=ctl({ctl_addr})
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={state}/slurm/state
SlurmdSpoolDir={state}/slurm/spool/%n
SlurmctldPidFile={state}/run/slurmctld.pid
SlurmdPidFile={state}/run/slurmd-%n.pid
SlurmctldLogFile={state}/log/slurmctld.log
SlurmdLogFile={state}/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig={state}/slurm/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
SlurmdTimeout={slurmd_timeout}
SlurmctldTimeout=10
MessageTimeout=5
KillWait=2
InactiveLimit=30
SchedulerParameters=bf_interval=1,bf_hetjob_immediate
MinJobAge=300
TCPTimeout=5
BatchStartTimeout=20
UnkillableStepTimeout=30
TmpFS=/tmp
{nodes}
{submit_node}
PreemptType=preempt/partition_prio
PreemptMode=CANCEL
PartitionName=cpu Nodes={cpu_nodes} Default=YES MaxTime=INFINITE State=UP PriorityTier=1
PartitionName=gpu Nodes={gpu_nodes} Default=NO MaxTime=INFINITE State=UP PriorityTier=1
PartitionName=urgent Nodes={gpu_nodes} Default=NO MaxTime=INFINITE State=UP PriorityTier=10
"""

SSHD_CONFIG = """\
# written by tests/lib/cluster.py
ListenAddress {addr}:{port}
HostKey {hostkey}
PidFile {pidfile}
AuthorizedKeysFile {authorized_keys}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
X11Forwarding no
PrintMotd no
UseDNS no
MaxStartups 100:30:200
MaxSessions 100
AcceptEnv TAAS_NPY_MEMORY_LIMIT
LogLevel VERBOSE
Subsystem sftp /usr/lib/openssh/sftp-server
"""


class TestCluster:
    __test__ = False  # not a test case for test collectors

    def __init__(self, cpus=2, gpus=2, share=(), cpus_per_host=4, slurmd_timeout=6,
                 state_root="/run"):
        if cpus < 1 or gpus < 1 or cpus + gpus > 200:
            raise ValueError("need at least one cpu and one gpu host")
        self.n_cpu = cpus
        self.n_gpu = gpus
        self.share = sorted({os.path.realpath(p) for p in share}, key=len)
        self.cpus_per_host = cpus_per_host
        self.slurmd_timeout = slurmd_timeout
        self.state_root = state_root
        self.suffix = None
        self.state_dir = None
        self.hosts = []
        self.controller = None
        self.bridge = None
        self.bridge_addr = None
        self.subnet = None
        self.jobs_dir = None
        self.shared_dir = None
        self.subnet_cidr = None
        self.ssh_config = None
        self.ssh_key = None
        self.slurm_conf = None
        self.munge_socket = None
        self._munged = None
        self._slurmctld = None
        self._watchdog = None
        self._captures = []
        self._popens = []
        self._started = False
        self._atexit = False

    # -- lifecycle --------------------------------------------------------------------------

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self, timeout=90):
        """Builds and starts the cluster; returns when every sshd listens and every node is
        idle. Raises ClusterError (with the daemons' logs) when something does not come up."""
        if self._started:
            raise ClusterError("cluster already started")
        self._check_requirements()
        missing = [p for p in self.share if not os.path.isdir(p)]
        if missing:
            raise ClusterError("share: not folders: %s" % missing)
        cleanup_leftovers(self.state_root)
        self.hosts, self.controller, self._popens, self._captures = [], None, [], []
        self._started = True
        if not self._atexit:
            atexit.register(self.stop)
            self._atexit = True
        try:
            self._make_state_dir()
            self._start_watchdog()
            self._choose_subnet()
            self._make_network()
            self._write_files()
            for h in [self.controller] + self.hosts:
                self._start_holder(h)
            self._start_munged()
            self._start_slurmctld()
            for h in self.hosts:
                self._start_sshd(h)
                self.start_slurmd(h.name, wait=False)
            self._wait_sshd(timeout)
            self.wait_nodes("idle", timeout=timeout)
        except ClusterError as e:
            logs = self.logs_text()
            self._stop_quietly()
            if logs and "====" not in str(e):
                raise ClusterError("%s\n%s" % (e, logs)) from None
            raise
        except BaseException:
            self._stop_quietly()
            raise
        return self

    def _stop_quietly(self):
        try:
            self.stop()
        except ClusterError as e:
            sys.stderr.write("TestCluster: %s\n" % e)

    def stop(self):
        """Kills every daemon and every process in the cluster's namespaces, removes the
        namespaces, links and folders. Safe to call more than once."""
        if not self._started:
            return
        self._started = False
        problems = []
        for cap in list(self._captures):
            try:
                cap.stop()
            except Exception as e:
                problems.append("tcpdump: %s" % e)
        # processes in the hosts' and the controller's namespaces, then munged and the rest
        inodes = [h.net_inode for h in [self.controller] + self.hosts
                  if h is not None and getattr(h, "net_inode", None)]

        def in_cluster():
            return [p for p in _pids() if p != os.getpid() and _ns_inode(p, "net") in inodes
                    and _alive(p)]
        left = _kill_until_gone(in_cluster, timeout=20)
        if left:
            problems.append("processes left: %s" % [(p, _cmdline(p)) for p in left])
        for p in [self._munged, self._slurmctld] + list(self._popens) + \
                [x for h in [self.controller] + self.hosts if h is not None
                 for x in (h.holder, h.sshd, h.slurmd)]:
            if p is None:
                continue
            if p.poll() is None:
                try:
                    p.kill()
                except OSError:
                    pass
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                problems.append("pid %d did not exit" % p.pid)
        self._popens = []
        if self.suffix:
            problems += cleanup_suffix(self.suffix, self.state_root)
        if self._watchdog is not None and self._watchdog.poll() is None:
            self._watchdog.terminate()
            try:
                self._watchdog.wait(10)
            except subprocess.TimeoutExpired:
                self._watchdog.kill()
        if problems:
            raise ClusterError("cluster cleanup incomplete: %s" % "; ".join(problems))

    # -- setup steps ------------------------------------------------------------------------

    def _check_requirements(self):
        if os.geteuid() != 0:
            raise ClusterError("TestCluster needs root (network and mount namespaces, "
                               "daemons on port 22); this process runs as uid %d" % os.geteuid())
        path = os.environ.get("PATH", "") + ":" + SBIN_PATH
        missing = [t for t in TOOLS if shutil.which(t, path=path) is None]
        if missing:
            raise ClusterError("TestCluster needs %s (scripts/deps.sh installs them)"
                               % ", ".join(missing))

    def _make_state_dir(self):
        os.makedirs(self.state_root, exist_ok=True)
        for _ in range(100):
            sfx = "%04x" % random.randrange(0x10000)
            if any(n.startswith("%s-%s-" % (PREFIX, sfx)) for n in _netns_names()):
                continue
            d = os.path.join(self.state_root, STATE_PREFIX + sfx)
            try:
                os.mkdir(d, 0o755)
            except FileExistsError:
                continue
            if (PREFIX + "br" + sfx) in _links():
                os.rmdir(d)
                continue
            self.suffix, self.state_dir = sfx, d
            break
        else:
            raise ClusterError("no free name suffix")
        os.chmod(self.state_dir, 0o755)   # munged wants its socket's folders searchable
        st = _stat_fields(os.getpid())
        with open(os.path.join(self.state_dir, "owner"), "w") as f:
            f.write("%d %d\n" % (os.getpid(), st[2]))
        for sub in ("log", "run", "ssh", "munge", "slurm/state", "slurm/spool", "stage", "jobs",
                    "etc", "shared"):
            os.makedirs(os.path.join(self.state_dir, sub), exist_ok=True)
        os.chmod(os.path.join(self.state_dir, "ssh"), 0o700)
        self.jobs_dir = os.path.join(self.state_dir, "jobs")
        self.shared_dir = os.path.join(self.state_dir, "shared")
        os.chmod(self.shared_dir, 0o1777)

    def _start_watchdog(self):
        st = _stat_fields(os.getpid())
        self._watchdog = subprocess.Popen(
            [sys.executable or "/usr/bin/python3", os.path.abspath(__file__), "--watchdog",
             self.suffix, str(os.getpid()), str(st[2]), self.state_root],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True)

    def _choose_subnet(self):
        r = _run(["ip", "-4", "route", "show", "table", "all"], check=False)
        used = []
        for line in r.stdout.splitlines():
            tok = line.split()
            if not tok:
                continue
            if tok[0] in ("local", "broadcast", "unicast", "unreachable", "blackhole",
                          "prohibit", "throw", "multicast", "anycast", "nat"):
                tok = tok[1:]
            if not tok or tok[0] == "default":
                continue
            try:
                used.append(ipaddress.ip_network(tok[0], strict=False))
            except ValueError:
                pass
        r = _run(["ip", "-4", "-o", "addr", "show"], check=False)
        for m in re.finditer(r"inet (\S+)", r.stdout):
            used.append(ipaddress.ip_interface(m.group(1)).network)
        rnd = random.Random()
        candidates = []
        for _ in range(40):
            candidates.append("10.%d.%d.0/24" % (rnd.randrange(64, 250), rnd.randrange(1, 255)))
            candidates.append("172.%d.%d.0/24" % (rnd.randrange(16, 32), rnd.randrange(1, 255)))
        for c in candidates:
            net = ipaddress.ip_network(c)
            if not any(net.overlaps(u) for u in used):
                self.subnet = net
                break
        else:
            raise ClusterError("no free /24 in 10.0.0.0/8 or 172.16.0.0/12")
        base = self.subnet.network_address
        self.bridge_addr = str(base + 1)
        self.bridge = PREFIX + "br" + self.suffix
        self.subnet_cidr = str(self.subnet)
        i = 0
        self.controller = Host("ctl", "ctl", str(base + 2),
                               "%s-%s-ctl" % (PREFIX, self.suffix), "tv%sh%d" % (self.suffix, i))
        for kind, n in (("cpu", self.n_cpu), ("gpu", self.n_gpu)):
            for k in range(1, n + 1):
                i += 1
                name = "%s%d" % (kind, k)
                self.hosts.append(Host(name, kind, str(base + 10 + i),
                                       "%s-%s-%s" % (PREFIX, self.suffix, name),
                                       "tv%sh%d" % (self.suffix, i)))

    def _make_network(self):
        ip = lambda *a: _run(["ip"] + list(a))
        ip("link", "add", self.bridge, "type", "bridge")
        ip("addr", "add", "%s/%d" % (self.bridge_addr, self.subnet.prefixlen), "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        for h in [self.controller] + self.hosts:
            peer = "tp%s%s" % (self.suffix, h.veth.rsplit("h", 1)[1])
            ip("netns", "add", h.netns)
            ip("link", "add", h.veth, "type", "veth", "peer", "name", peer)
            ip("link", "set", peer, "netns", h.netns)
            ip("link", "set", h.veth, "master", self.bridge)
            ip("link", "set", h.veth, "up")
            ns = ["netns", "exec", h.netns, "ip"]
            ip(*ns, "link", "set", peer, "name", "eth0")
            ip(*ns, "addr", "add", "%s/%d" % (h.addr, self.subnet.prefixlen), "dev", "eth0")
            ip(*ns, "link", "set", "eth0", "up")
            ip(*ns, "link", "set", "lo", "up")
            ip(*ns, "route", "add", "default", "via", self.bridge_addr)
            h.net_inode = _netns_inode(h.netns)

    def _write_files(self):
        d = self.state_dir
        # /etc/hosts and /etc/resolv.conf of the hosts
        lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback",
                 "%s\tctl" % self.controller.addr]
        lines += ["%s\t%s" % (h.addr, h.name) for h in self.hosts]
        me = socket.gethostname()
        names = sorted({me, me.split(".")[0]} - {"", "localhost", "ctl"}
                       - {h.name for h in self.hosts})
        if names:
            lines.append("%s\t%s" % (self.bridge_addr, " ".join(names)))
        with open(os.path.join(d, "etc", "hosts"), "w") as f:
            f.write("\n".join(lines) + "\n")
        with open(os.path.join(d, "etc", "resolv.conf"), "w") as f:
            f.write("# taas test cluster: no DNS server\n")
        # munge key
        key = os.path.join(d, "munge", "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        self.munge_socket = os.path.join(d, "munge", "munge.socket")
        # ssh keys
        sshd = os.path.join(d, "ssh")
        self.ssh_key = os.path.join(sshd, "id_ed25519")
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "taas-cluster-client",
              "-f", self.ssh_key])
        with open(self.ssh_key + ".pub") as f:
            pub = f.read()
        with open(os.path.join(sshd, "authorized_keys"), "w") as f:
            f.write(pub)
        known = []
        for h in self.hosts:
            hk = os.path.join(sshd, "host_%s" % h.name)
            _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", h.name, "-f", hk])
            with open(hk + ".pub") as f:
                kt, kb = f.read().split()[:2]
            known.append("%s,%s %s %s" % (h.name, h.addr, kt, kb))
            with open(os.path.join(sshd, "sshd_config_%s" % h.name), "w") as f:
                f.write(SSHD_CONFIG.format(addr=h.addr, port=SSH_PORT, hostkey=hk,
                                           pidfile=os.path.join(d, "run", "sshd-%s.pid" % h.name),
                                           authorized_keys=os.path.join(sshd, "authorized_keys")))
        known_hosts = os.path.join(sshd, "known_hosts")
        with open(known_hosts, "w") as f:
            f.write("\n".join(known) + "\n")
        self.ssh_config = os.path.join(sshd, "ssh_config")
        cfg = ["# written by tests/lib/cluster.py"]
        for h in self.hosts:
            cfg += ["Host %s %s" % (h.name, h.addr), "  HostName %s" % h.addr,
                    "  HostKeyAlias %s" % h.name]
        cfg += ["Host *", "  User root", "  Port %d" % SSH_PORT,
                "  IdentityFile %s" % self.ssh_key, "  IdentitiesOnly yes",
                "  UserKnownHostsFile %s" % known_hosts, "  GlobalKnownHostsFile /dev/null",
                "  StrictHostKeyChecking yes", "  BatchMode yes", "  CheckHostIP no",
                "  PasswordAuthentication no", "  ForwardAgent no", "  ForwardX11 no",
                "  ControlMaster no", "  ConnectTimeout 20", "  LogLevel ERROR",
                "  SendEnv TAAS_NPY_MEMORY_LIMIT"]
        with open(self.ssh_config, "w") as f:
            f.write("\n".join(cfg) + "\n")
        # slurm
        self.slurm_conf = os.path.join(d, "slurm", "slurm.conf")
        nodes = "\n".join(
            "NodeName=%s NodeAddr=%s NodeHostname=%s CPUs=%d Feature=%s State=UNKNOWN"
            % (h.name, h.addr, h.name, self.cpus_per_host, h.kind) for h in self.hosts)
        with open(os.path.join(d, "slurm", "plugstack.conf"), "w") as f:
            f.write("# no SPANK plugins\n")
        # The root namespace (where srun/salloc/sbatch run) as a node that is never scheduled:
        # Slurm 22.05.7-22.05.8 (Debian 12) sends an srun's step messages (node failure, step
        # complete, time out) to slurm_conf_get_nodeaddr(srun's hostname) and to 0.0.0.0 when
        # that host is no node (SchedMD bug 16401, fixed in 22.05.9): srun then hangs after a
        # node failure. State=FUTURE keeps it out of sinfo and of every partition.
        me = socket.gethostname().split(".")[0]
        submit = ""
        if me and re.match(r"^[A-Za-z0-9_-]+$", me) and me not in [h.name for h in self.hosts] \
                and me != "ctl":
            submit = ("NodeName=%s NodeHostname=%s NodeAddr=%s CPUs=1 State=FUTURE"
                      % (me, me, self.bridge_addr))
        with open(self.slurm_conf, "w") as f:
            f.write(SLURM_CONF.format(submit_node=submit,
                cluster="taas" + self.suffix, ctl_addr=self.controller.addr,
                ctld_port=SLURMCTLD_PORT, slurmd_port=SLURMD_PORT,
                munge_socket=self.munge_socket, state=d, slurmd_timeout=self.slurmd_timeout,
                nodes=nodes,
                cpu_nodes=",".join(h.name for h in self.hosts if h.kind == "cpu"),
                gpu_nodes=",".join(h.name for h in self.hosts if h.kind == "gpu")))
        for h in self.hosts:
            os.makedirs(os.path.join(d, "slurm", "spool", h.name), exist_ok=True)
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)

    def _log(self, name):
        return open(os.path.join(self.state_dir, "log", name), "ab")

    def _daemon_env(self):
        return {"PATH": SBIN_PATH, "LANG": "C.UTF-8", "SLURM_CONF": self.slurm_conf,
                "HOME": "/root"}

    def _start_holder(self, h, timeout=30):
        stage = os.path.join(self.state_dir, "stage")
        argv = ["nsenter", "--net=/run/netns/" + h.netns, "unshare", "--mount", "--uts",
                "--propagation", "private", "sh", "-c", _HOLDER, "holder-" + h.name, h.name,
                stage, self.jobs_dir, os.path.join(self.state_dir, "etc", "hosts"),
                os.path.join(self.state_dir, "etc", "resolv.conf")] + self.share
        with self._log("holder-%s.log" % h.name) as err:
            h.holder = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=err, env=self._daemon_env(), close_fds=True)
        try:
            deadline = time.monotonic() + timeout
            line = b""
            while not line.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([h.holder.stdout], [], [], left)[0]:
                    raise ClusterError("host %s: holder not ready within %d s" % (h.name, timeout))
                c = h.holder.stdout.read(1)
                if not c:
                    raise ClusterError("host %s: holder exited (%s): %s" % (
                        h.name, h.holder.wait(10), self._read_log("holder-%s.log" % h.name)))
                line += c
            if line.strip() != b"ready":
                raise ClusterError("host %s: holder said %r" % (h.name, line))
        finally:
            h.holder.stdout.close()

    def _nsenter(self, h, argv, wd=None):
        pre = ["nsenter", "-t", str(h.pid), "-m", "-u", "-n"]
        if wd is not None:
            pre.append("--wd=%s" % wd)
        return pre + ["--"] + list(argv)

    def _start_munged(self, timeout=30):
        d = os.path.join(self.state_dir, "munge")
        # -F: in the foreground, munged logs to stderr (log/munged.out)
        argv = ["munged", "-F", "--key-file=%s" % os.path.join(d, "munge.key"),
                "--socket=%s" % self.munge_socket, "--pid-file=%s" % os.path.join(d, "munged.pid"),
                "--seed-file=%s" % os.path.join(d, "munged.seed"), "--num-threads=4"]
        with self._log("munged.out") as out:
            self._munged = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                            stderr=out, env=self._daemon_env(), close_fds=True)

        def up():
            if self._munged.poll() is not None:
                raise ClusterError("munged exited (%s)" % self._munged.returncode)
            return _run(["munge", "-n", "-S", self.munge_socket], check=False,
                        timeout=10).returncode == 0
        if not _wait_until(up, timeout, 0.05):
            raise ClusterError("munged did not answer within %d s" % timeout)

    def _start_slurmctld(self):
        h = self.controller
        with self._log("slurmctld.out") as out:
            self._slurmctld = subprocess.Popen(
                self._nsenter(h, ["slurmctld", "-D", "-c", "-i", "-f", self.slurm_conf],
                              wd=self.state_dir),
                stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=self._daemon_env(),
                close_fds=True)

    def _start_sshd(self, h):
        cfg = os.path.join(self.state_dir, "ssh", "sshd_config_%s" % h.name)
        log = os.path.join(self.state_dir, "log", "sshd-%s.log" % h.name)
        with self._log("sshd-%s.out" % h.name) as out:
            h.sshd = subprocess.Popen(
                self._nsenter(h, ["/usr/sbin/sshd", "-D", "-f", cfg, "-E", log], wd="/"),
                stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=self._daemon_env(),
                close_fds=True)

    def _wait_sshd(self, timeout):
        def listening(h):
            if h.sshd.poll() is not None:
                raise ClusterError("sshd on %s exited (%s): %s" % (
                    h.name, h.sshd.returncode, self._read_log("sshd-%s.log" % h.name)))
            try:
                with socket.create_connection((h.addr, SSH_PORT), timeout=2) as s:
                    s.settimeout(5)
                    return s.recv(4).startswith(b"SSH-")
            except OSError:
                return False
        for h in self.hosts:
            if not _wait_until(lambda: listening(h), timeout, 0.05):
                raise ClusterError("sshd on %s does not listen on %s:%d" % (h.name, h.addr,
                                                                             SSH_PORT))

    # -- hosts ------------------------------------------------------------------------------

    def host(self, name):
        for h in self.hosts:
            if h.name == name:
                return h
        if self.controller is not None and name == self.controller.name:
            return self.controller
        raise KeyError("no host %r in the cluster (%s)" % (name, [h.name for h in self.hosts]))

    @property
    def cpu_hosts(self):
        return [h for h in self.hosts if h.kind == "cpu"]

    @property
    def gpu_hosts(self):
        return [h for h in self.hosts if h.kind == "gpu"]

    def _host(self, h):
        return h if isinstance(h, Host) else self.host(h)

    def popen_on(self, host, argv, **kw):
        """subprocess.Popen of argv inside the host's net, mount and uts namespaces. `cwd` is
        applied inside the host (default /). The process is killed by stop()."""
        h = self._host(host)
        wd = kw.pop("cwd", None)
        p = subprocess.Popen(self._nsenter(h, argv, wd=wd or "/"), **kw)
        self._popens.append(p)
        return p

    def run_on(self, host, argv, timeout=60, **kw):
        """subprocess.run of argv inside the host's namespaces (text output captured unless
        told otherwise); returns the CompletedProcess."""
        h = self._host(host)
        wd = kw.pop("cwd", None)
        if "stdout" not in kw and "stderr" not in kw:
            kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        if "input" not in kw:
            kw.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.run(self._nsenter(h, argv, wd=wd or "/"), timeout=timeout, **kw)

    def ssh_argv(self, host, *argv):
        return ["ssh", "-F", self.ssh_config, self._host(host).name] + list(argv)

    def ompi_env(self, base=None):
        """os.environ (or base) with what Open MPI needs here: running as root allowed, and its
        out-of-band and TCP transports kept on the cluster's subnet (CIDR, since the
        interface is the bridge in the root namespace and eth0 on the hosts)."""
        env = dict(os.environ if base is None else base)
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_oob_tcp_if_include=self.subnet_cidr,
                   OMPI_MCA_btl_tcp_if_include=self.subnet_cidr)
        return env

    def ompi_ssh_args(self):
        """mpirun arguments that launch over SSH on the cluster (give --host the hosts'
        addresses: names would be looked up in the root namespace's DNS)."""
        return ["--mca", "plm_rsh_agent", "ssh -F %s" % self.ssh_config,
                "--mca", "oob_tcp_if_include", self.subnet_cidr,
                "--mca", "btl_tcp_if_include", self.subnet_cidr]

    def _daemon_pids(self, h):
        pids = {h.pid}
        if h.sshd is not None:
            pids.add(h.sshd.pid)
        if h.slurmd is not None and h.slurmd.poll() is None:
            pids.update((h.slurmd.pid, h.slurmd_init, h.slurmd_pid))
        return pids

    def processes_on(self, host):
        """[(pid, cmdline)] of the live processes in the host's namespaces but its daemons."""
        h = self._host(host)
        daemons = self._daemon_pids(h)
        return [(p, _cmdline(p)) for p in _pids_in_ns("net", h.net_inode) if p not in daemons]

    # -- slurm ------------------------------------------------------------------------------

    def slurm_env(self, base=None):
        env = dict(os.environ if base is None else base)
        for k in list(env):
            if k.startswith(("SLURM_", "SBATCH_", "SALLOC_", "SRUN_", "SQUEUE_", "SINFO_")):
                del env[k]
        env["SLURM_CONF"] = self.slurm_conf
        return env

    def slurm(self, *argv, timeout=60, **kw):
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        kw.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.run(list(argv), env=self.slurm_env(kw.pop("env", None)),
                              timeout=timeout, **kw)

    def node_states(self):
        """{node: state} as sinfo reports them (idle, alloc, mix, down*, ...)."""
        r = self.slurm("sinfo", "-h", "-N", "-o", "%N %t", timeout=30)
        if r.returncode != 0:
            return {}
        states = {}
        for line in r.stdout.splitlines():
            f = line.split()
            if len(f) == 2:
                states[f[0]] = f[1]
        return states

    def wait_nodes(self, state="idle", names=None, timeout=60):
        """Waits until every node in names (default all) is in `state`; ClusterError with the
        logs when they are not within timeout seconds."""
        names = [self._host(n).name for n in names] if names else [h.name for h in self.hosts]
        last = {}

        def ready():
            if self._slurmctld.poll() is not None:
                raise ClusterError("slurmctld exited (%s)" % self._slurmctld.returncode)
            last.clear()
            last.update(self.node_states())
            return all(last.get(n) == state for n in names)
        if not _wait_until(ready, timeout, 0.2):
            raise ClusterError("nodes %s not %s within %d s: sinfo says %s\n%s"
                               % (names, state, timeout, last, self.logs_text()))

    def _slurmd_ns_pids(self, h):
        return _pids_in_ns("pid", h.slurmd_pidns) if h.slurmd_pidns else []

    def start_slurmd(self, host, wait=True, timeout=60):
        """Starts the host's slurmd (in a new PID namespace); with wait, waits until its node
        is idle."""
        h = self._host(host)
        if h.slurmd is not None and h.slurmd.poll() is None:
            raise ClusterError("slurmd on %s is running" % h.name)
        argv = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child",
                sys.executable or "/usr/bin/python3", "-c", _INIT,
                shutil.which("slurmd", path=SBIN_PATH), "-D", "-N", h.name, "-f", self.slurm_conf]
        with self._log("slurmd-%s.out" % h.name) as out:
            h.slurmd = subprocess.Popen(self._nsenter(h, argv, wd="/"),
                                        stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                        env=self._daemon_env(), close_fds=True)

        def children(pid):
            try:
                with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
                    return [int(x) for x in f.read().split()]
            except OSError:
                return []

        def running():
            if h.slurmd.poll() is not None:
                raise ClusterError("slurmd on %s exited (%s): %s" % (
                    h.name, h.slurmd.returncode, self._read_log("slurmd-%s.out" % h.name)
                    + self._read_log("slurmd-%s.log" % h.name)))
            for init in children(h.slurmd.pid):
                for k in children(init):
                    if " -D -N %s " % h.name in _cmdline(k) + " ":
                        return init, k
            return None
        found = _wait_until(running, 30, 0.01)
        if not found:
            raise ClusterError("slurmd on %s did not start within 30 s" % h.name)
        h.slurmd_init, h.slurmd_pid = found
        h.slurmd_pidns = _ns_inode(h.slurmd_init, "pid")
        if wait:
            self.wait_nodes("idle", [h.name], timeout)

    def kill_slurmd(self, host, timeout=30):
        """SIGKILLs the host's slurmd with every process under it (its PID namespace: job steps
        and their tasks on that host) and waits until they are all gone."""
        h = self._host(host)
        if h.slurmd is None:
            return
        if h.slurmd.poll() is None:
            h.slurmd.kill()   # unshare --kill-child: the init dies, and the namespace with it
        left = _kill_until_gone(lambda: self._slurmd_ns_pids(h), timeout)
        try:
            h.slurmd.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        if left or h.slurmd.poll() is None:
            raise ClusterError("slurmd on %s: processes left %s" % (h.name, left))

    # -- tcpdump and logs -------------------------------------------------------------------

    def tcpdump(self, path, filter=None):
        """Starts a capture of the bridge into path (pcap); use as a context manager or call
        .stop(). Returns when tcpdump is listening."""
        return Capture(self, path, filter)

    def _read_log(self, name, limit=20000):
        try:
            with open(os.path.join(self.state_dir, "log", name), "rb") as f:
                data = f.read()
        except OSError:
            return ""
        return data[-limit:].decode(errors="replace")

    def logs(self):
        """{log name: its text (last 20000 bytes)} of every daemon of the cluster."""
        out = {}
        if not self.state_dir:
            return out
        try:
            names = sorted(os.listdir(os.path.join(self.state_dir, "log")))
        except OSError:
            return out
        for n in names:
            out[n] = self._read_log(n)
        return out

    def logs_text(self, limit=4000):
        parts = []
        for n, t in self.logs().items():
            if t.strip():
                parts.append("==== %s ====\n%s" % (n, t[-limit:]))
        return "\n".join(parts)


# ---------------------------------------------------------------------------------------------
# the watchdog: python3 cluster.py --watchdog SUFFIX OWNER_PID OWNER_START STATE_ROOT

def _watchdog(suffix, owner, start, state_root):
    signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    st = _stat_fields(owner)
    if st is not None and st[2] == start:
        try:
            fd = os.pidfd_open(owner)
        except (AttributeError, OSError):
            fd = None
        if fd is not None:
            select.select([fd], [], [])
        else:
            while _stat_fields(owner) and _stat_fields(owner)[2] == start:
                time.sleep(1)
    cleanup_suffix(suffix, state_root)


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--watchdog":
        _watchdog(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    elif len(sys.argv) == 2 and sys.argv[1] == "--cleanup":
        cleanup_leftovers()
    else:
        sys.exit("usage: cluster.py --cleanup (removes the leftovers of crashed runs)")
