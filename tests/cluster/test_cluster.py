"""Smoke test of the test cluster (tests/lib/cluster.py): one cluster of two cpu and two gpu hosts
for the module, checked through Slurm, SSH, the hosts' private folders and Open MPI, the ways
later tests will use it. Needs root and the packages of scripts/deps.sh; without them it fails
(it does not skip)."""

import ipaddress
import os
import shutil
import subprocess
import tempfile
import time
import unittest

import taastest
from cluster import TestCluster, read_pcap

SOURCE_DIR = os.environ.get(
    "TAAS_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
# the build folder (ctest's TAAS_KERNEL lies in it), often under /tmp in CI
BUILD_DIR = (os.path.dirname(os.path.abspath(os.environ["TAAS_KERNEL"]))
             if os.environ.get("TAAS_KERNEL") else None)
DEADLINE = 60   # seconds for anything to happen: generous, only ever a bound

CL = None
WORK = None     # this module's temp folder, under /tmp, shared read-only with the hosts

ALLREDUCE_C = r"""
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char host[256];
  gethostname(host, sizeof host);
  int v = rank + 1, sum = 0;
  MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("rank %d of %d on %s sum %d\n", rank, size, host, sum);
  MPI_Finalize();
  return 0;
}
"""


def setUpModule():
    global CL, WORK
    if os.geteuid() != 0:
        raise RuntimeError("the cluster tests need root (network and mount namespaces, "
                           "Slurm and sshd daemons); run them as root")
    WORK = tempfile.mkdtemp(prefix="taas-cluster-test-", dir="/tmp")
    try:
        with open(os.path.join(WORK, "allreduce.c"), "w") as f:
            f.write(ALLREDUCE_C)
        with open(os.path.join(WORK, "marker"), "w") as f:
            f.write("shared\n")
        subprocess.run(["mpicc", "-o", os.path.join(WORK, "allreduce"),
                        os.path.join(WORK, "allreduce.c")], check=True, timeout=120,
                       capture_output=True)
        share = [WORK, SOURCE_DIR]
        if BUILD_DIR and os.path.isdir(BUILD_DIR):
            share.append(BUILD_DIR)
        CL = TestCluster(cpus=2, gpus=2, share=share)
        CL.start()
    except BaseException:
        shutil.rmtree(WORK, ignore_errors=True)
        raise


def tearDownModule():
    try:
        if CL is not None:
            CL.stop()
    finally:
        shutil.rmtree(WORK, ignore_errors=True)


def wait_until(predicate, timeout=DEADLINE):
    return taastest.wait_until(predicate, timeout, 0.1)


def lines(text):
    return sorted(line.strip() for line in text.splitlines() if line.strip())


class ClusterTestCase(unittest.TestCase):
    maxDiff = None

    def check(self, r, what=""):
        """Asserts that a CompletedProcess succeeded, with its output and the logs if not."""
        if r.returncode != 0:
            self.fail("%s%s exited %d\nstdout:\n%s\nstderr:\n%s\n%s" % (
                what, r.args, r.returncode, r.stdout, r.stderr, CL.logs_text()))
        return r

    def slurm(self, *argv, **kw):
        return self.check(CL.slurm(*argv, **kw))

    def squeue_ids(self):
        return self.slurm("squeue", "-h", "-o", "%i").stdout.split()

    def wait_queue_empty(self):
        if wait_until(lambda: not self.squeue_ids()):
            return
        self.fail("squeue not empty after %d s: %s" % (
            DEADLINE, self.slurm("squeue").stdout))


class SlurmTest(ClusterTestCase):

    def sinfo(self):
        return lines(self.slurm("sinfo", "-h", "-N", "-o", "%N %P %t").stdout)

    def test_sinfo_nodes_idle_in_partitions(self):
        want = ["cpu1 cpu* idle", "cpu2 cpu* idle", "gpu1 gpu idle", "gpu1 urgent idle", "gpu2 gpu idle",
                "gpu2 urgent idle"]  # urgent: the partition whose jobs preempt the others
        # (the backfill scheduler marks nodes "plnd" for a moment around a heterogeneous job)
        wait_until(lambda: self.sinfo() == want)
        self.assertEqual(self.sinfo(), want)

    def test_srun_gpu_partition(self):
        out = self.slurm("srun", "-p", "gpu", "-N2", "hostname").stdout
        self.assertEqual(lines(out), ["gpu1", "gpu2"])

    def test_srun_heterogeneous(self):
        out = self.slurm("srun", "-p", "cpu", "-N2", "hostname", ":",
                         "-p", "gpu", "-N2", "hostname").stdout
        self.assertEqual(lines(out), ["cpu1", "cpu2", "gpu1", "gpu2"])

    def test_sbatch_heterogeneous(self):
        out = os.path.join(CL.shared_dir, "het-%j.out")
        script = os.path.join(CL.shared_dir, "het.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\n"
                    "#SBATCH -p cpu -N2 -o %s\n"
                    "#SBATCH hetjob\n"
                    "#SBATCH -p gpu -N2\n"
                    "echo batch on $(hostname)\n"
                    "srun --het-group=0,1 hostname\n" % out)
        job = self.slurm("sbatch", "--parsable", "--chdir", CL.shared_dir, script).stdout
        job = job.strip().split(";")[0]
        self.wait_queue_empty()
        path = out.replace("%j", job)
        with open(path) as f:
            text = f.read()
        self.assertEqual(lines(text), ["batch on cpu1", "cpu1", "cpu2", "gpu1", "gpu2"], text)
        self.assertEqual(self.squeue_ids(), [])

    def test_scancel_running_job(self):
        job = self.slurm("sbatch", "--parsable", "-p", "cpu", "-w", "cpu1", "-o", "/dev/null",
                         "--chdir", "/", "--wrap", "exec sleep 3600").stdout.strip()

        def running():
            out = self.slurm("squeue", "-h", "-j", job, "-o", "%T").stdout.split()
            return out == ["RUNNING"]
        self.assertTrue(wait_until(running), self.slurm("squeue").stdout)
        self.assertTrue(wait_until(lambda: any("sleep 3600" in c for _, c in
                                               CL.processes_on("cpu1"))),
                        CL.processes_on("cpu1"))
        self.slurm("scancel", job)
        self.wait_queue_empty()
        self.assertTrue(wait_until(lambda: not CL.processes_on("cpu1")), CL.processes_on("cpu1"))

    def test_kill_slurmd_takes_its_jobs(self):
        srun = subprocess.Popen(["srun", "-p", "cpu", "-w", "cpu2", "sleep", "3600"],
                                env=CL.slurm_env(), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            self.assertTrue(wait_until(lambda: any("sleep 3600" in c for _, c in
                                                   CL.processes_on("cpu2"))),
                            CL.processes_on("cpu2"))
            [job] = self.squeue_ids()
            CL.kill_slurmd("cpu2")
            self.assertEqual(CL.processes_on("cpu2"), [])
            # slurmctld notices (SlurmdTimeout), ends the job and tells srun, which returns
            # (with status 0: its only task was on the failed node)
            out, _ = srun.communicate(timeout=DEADLINE)
            self.assertIn("Node failure on cpu2", out)
            self.assertEqual(self.squeue_ids(), [])
            self.assertIn("JobState=NODE_FAIL", self.slurm("scontrol", "show", "job", job).stdout)
            self.assertTrue(CL.node_states()["cpu2"].startswith("down"), CL.node_states())
        finally:
            if srun.poll() is None:
                srun.kill()
                srun.wait(10)
            srun.stdout.close()
            if CL.host("cpu2").slurmd.poll() is not None:
                CL.start_slurmd("cpu2", wait=True, timeout=DEADLINE)
        self.assertEqual(CL.node_states()["cpu2"], "idle")


class SSHTest(ClusterTestCase):

    def test_ssh_hostname(self):
        for h in CL.hosts:
            r = self.check(subprocess.run(CL.ssh_argv(h.name, "hostname"), capture_output=True,
                                          text=True, timeout=DEADLINE, stdin=subprocess.DEVNULL))
            self.assertEqual(r.stdout.strip(), h.name)

    def test_wrong_key_refused(self):
        d = tempfile.mkdtemp(dir=CL.shared_dir)
        try:
            key = os.path.join(d, "wrong")
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key],
                           check=True, timeout=DEADLINE, capture_output=True)
            with open(CL.ssh_config) as f:
                cfg = f.read()
            self.assertIn("IdentityFile %s\n" % CL.ssh_key, cfg)
            wrong_cfg = os.path.join(d, "ssh_config")
            with open(wrong_cfg, "w") as f:
                f.write(cfg.replace("IdentityFile %s\n" % CL.ssh_key, "IdentityFile %s\n" % key))
            r = subprocess.run(["ssh", "-F", wrong_cfg, "gpu1", "hostname"], capture_output=True,
                               text=True, timeout=DEADLINE, stdin=subprocess.DEVNULL)
            self.assertEqual(r.returncode, 255, r)
            self.assertIn("Permission denied", r.stderr)
            self.assertEqual(r.stdout, "")
        finally:
            shutil.rmtree(d, ignore_errors=True)


class IsolationTest(ClusterTestCase):

    def test_root_tmp_not_visible_shared_folders_are(self):
        fd, secret = tempfile.mkstemp(prefix="taas-cluster-secret-", dir="/tmp")
        os.close(fd)
        try:
            for h in CL.hosts:
                r = CL.run_on(h.name, ["cat", secret])
                self.assertNotEqual(r.returncode, 0, "%s sees %s" % (h.name, secret))
                r = self.check(CL.run_on(h.name, ["cat", os.path.join(WORK, "marker")]))
                self.assertEqual(r.stdout, "shared\n")
                r = self.check(CL.run_on(h.name, ["hostname"]))
                self.assertEqual(r.stdout.strip(), h.name)
                self.check(CL.run_on(h.name, ["test", "-f",
                                              os.path.join(SOURCE_DIR, "CMakeLists.txt")]))
                if BUILD_DIR and os.path.isdir(BUILD_DIR):
                    r = self.check(CL.run_on(h.name, ["ls", "-A", BUILD_DIR]))
                    self.assertEqual(sorted(r.stdout.split()), sorted(os.listdir(BUILD_DIR)))
                # shared folders are read-only on the hosts
                r = CL.run_on(h.name, ["touch", os.path.join(WORK, "x")])
                self.assertNotEqual(r.returncode, 0)
        finally:
            os.unlink(secret)

    def test_jobs_dir_private_per_host(self):
        path = os.path.join(CL.jobs_dir, "only-gpu1")
        self.check(CL.run_on("gpu1", ["sh", "-c", "echo x > %s" % path]))
        self.check(CL.run_on("gpu1", ["test", "-f", path]))
        self.assertNotEqual(CL.run_on("gpu2", ["test", "-e", path]).returncode, 0)
        self.assertFalse(os.path.exists(path))
        self.check(CL.run_on("gpu1", ["rm", path]))

    def test_tcpdump_on_bridge(self):
        pcap = os.path.join(CL.shared_dir, "ssh.pcap")
        with CL.tcpdump(pcap):
            self.check(subprocess.run(CL.ssh_argv("gpu2", "true"), capture_output=True,
                                      text=True, timeout=DEADLINE, stdin=subprocess.DEVNULL))
        packets = read_pcap(pcap)
        gpu2 = CL.host("gpu2").addr
        self.assertTrue(any(p.src == CL.bridge_addr and p.dst == gpu2 and p.dport == 22
                            for p in packets), packets[:20])
        # what crosses the bridge stays in its subnet; Linux's own link-local multicast
        # (an IGMP report to 224.0.0.22 when an interface joins a group) never leaves the link
        link_local = ipaddress.ip_network("224.0.0.0/24")
        for p in packets:
            self.assertIn(ipaddress.ip_address(p.src), CL.subnet, p)
            dst = ipaddress.ip_address(p.dst)
            self.assertTrue(dst in CL.subnet or dst in link_local, p)


class MPITest(ClusterTestCase):
    """Open MPI across hosts: over SSH (mpirun in the root namespace) and inside Slurm (srun
    with PMIx, mpirun in an allocation)."""

    def prog(self):
        return os.path.join(WORK, "allreduce")

    def assert_allreduce(self, out):
        self.assertEqual(lines(out), ["rank 0 of 2 on gpu1 sum 3", "rank 1 of 2 on gpu2 sum 3"],
                         out)

    def test_mpirun_over_ssh(self):
        hosts = ",".join(CL.host(n).addr for n in ("gpu1", "gpu2"))
        base = ["mpirun", "--host", hosts, "-np", "2"] + CL.ompi_ssh_args()
        r = self.check(subprocess.run(base + ["hostname"], env=CL.ompi_env(), capture_output=True,
                                      text=True, timeout=DEADLINE, stdin=subprocess.DEVNULL))
        self.assertEqual(lines(r.stdout), ["gpu1", "gpu2"])
        r = self.check(subprocess.run(base + [self.prog()], env=CL.ompi_env(),
                                      capture_output=True, text=True, timeout=DEADLINE,
                                      stdin=subprocess.DEVNULL))
        self.assert_allreduce(r.stdout)

    def test_srun_mpi_list(self):
        r = self.slurm("srun", "--mpi=list")
        self.assertIn("pmix", r.stdout + r.stderr)

    def test_srun_pmix(self):
        r = self.slurm("srun", "--mpi=pmix", "-p", "gpu", "-N2", self.prog(),
                       env=CL.ompi_env())
        self.assert_allreduce(r.stdout)

    def test_mpirun_in_salloc(self):
        r = self.slurm("salloc", "-p", "gpu", "-N2", "mpirun", self.prog(), env=CL.ompi_env())
        self.assert_allreduce(r.stdout)

    def test_mpirun_in_sbatch(self):
        out = os.path.join(CL.shared_dir, "mpi-%j.out")
        job = self.slurm("sbatch", "--parsable", "-p", "gpu", "-N2", "-o", out, "--chdir", "/",
                         "--wrap", "mpirun %s" % self.prog(), env=CL.ompi_env()).stdout.strip()
        self.wait_queue_empty()
        with open(out.replace("%j", job)) as f:
            self.assert_allreduce(f.read())


if __name__ == "__main__":
    unittest.main()
