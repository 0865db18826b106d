"""Detached jobs' folders made by hand (issue 27): what jobs(), attach() and cancel() make of
files a kernel did not write. cancel() signals only the process that holds the folder's lock,
never a number read from state.json; a damaged folder is one damaged row of jobs(), which reads
each state.json whole with a size cap; an ended job's error says what its records prove.

The coordinators here are the test's own: a process that holds a folder's lock (flock) until
its stdin closes. The processes a forged "pid" names are the test's `sleep` children: each is
killed by the test at the end, and the signal it died of says whether anyone else signalled it
first (a fatal signal's exit status is the first one's).

Against a kernel from before these fixes, run this file only inside a pid namespace of its
own (`unshare --user --map-root-user --pid --fork --mount-proc ...`): such a kernel turned the
pid 4294967295 into kill(-1), every process of the user."""

import json
import os
import signal
import subprocess
import unittest

import taastest
from taastest import error_of, result_text, stream_text

HOLD = ("import fcntl, sys\n"
        "f = open(sys.argv[1], 'a')\n"
        "fcntl.flock(f, fcntl.LOCK_EX)\n"
        "print('locked', flush=True)\n"
        "sys.stdin.read()\n")


def env_of(tmp):
    return {"TAAS_JOBS_DIR": os.path.join(tmp, "jobs")}


class JobFolders(taastest.KernelCase):
    tmp_prefix = "taas-job-folders-"
    kernel_env = staticmethod(env_of)

    def setUp(self):
        self.children = []

    def tearDown(self):
        for p in self.children:
            if p.poll() is None:
                p.kill()
                p.wait()
            for pipe in (p.stdin, p.stdout):
                if pipe:
                    pipe.close()

    @property
    def jobs_dir(self):
        return os.path.join(self.tmp.name, "jobs")

    def folder(self, name, state=None, raw=None, journal=None, view=None):
        """A job folder: job-20000101-000000-<name> with the files given; its id."""
        job = "job-20000101-000000-" + name
        d = os.path.join(self.jobs_dir, job)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "state.json"), "wb") as f:
            f.write(raw if raw is not None else json.dumps(dict({"id": job}, **state)).encode())
        if journal is not None:
            with open(os.path.join(d, "journal.jsonl"), "w") as f:
                f.write(journal)
        if view is not None:
            with open(os.path.join(d, "view.json"), "w") as f:
                f.write(view)
        return job

    def spawn(self, *args, **kw):
        p = subprocess.Popen(args, **kw)
        self.children.append(p)
        return p

    def hold(self, job):
        """A process that holds job's lock (its coordinator, as far as anyone can tell)."""
        p = self.spawn("/usr/bin/python3", "-c", HOLD, os.path.join(self.jobs_dir, job, "lock"),
                       stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.assertEqual(p.stdout.readline(), b"locked\n")
        return p

    def signalled(self, p):
        """The first fatal signal p got: the test's SIGKILL now, unless another came before."""
        p.kill()
        p.wait()
        return -p.returncode

    def running(self, name, pid):
        return self.folder(name, {"state": "running", "pid": pid, "created": 946684800, "model": "net"})

    # ---- cancel() -----------------------------------------------------------------------

    def test_cancel_never_signals_a_pid_from_state_json(self):
        victim = self.spawn("sleep", "1000")
        forged = {"wrapped": 4294967296 + victim.pid, "minus-one": 4294967295, "negative": -1, "zero": 0, "one": 1,
                  "largest": 9223372036854775807}
        for name, pid in sorted(forged.items()):
            with self.subTest(pid=pid):
                job = self.running("pid-" + name, pid)
                holder = self.hold(job)
                err = self.error("cancel('%s')" % job, "TaasJobError")
                self.assertIn("job %s's state.json has \"pid\": %d, which is no process id" % (job, pid),
                              err["evalue"])
                self.assertEqual(self.signalled(holder), signal.SIGKILL)
        self.assertEqual(self.signalled(victim), signal.SIGKILL)

    def test_cancel_refuses_a_pid_that_does_not_hold_the_lock(self):
        victim = self.spawn("sleep", "1000")
        job = self.running("stale", victim.pid)
        holder = self.hold(job)
        err = self.error("cancel('%s')" % job, "TaasJobError")
        self.assertIn("its lock is held by process %d, not by process %d" % (holder.pid, victim.pid), err["evalue"])
        self.assertEqual(self.signalled(holder), signal.SIGKILL)
        # the lock free: the job is lost, and nothing is signalled
        err = self.error("cancel('%s')" % job, "TaasJobError")
        self.assertIn("job %s has already ended (lost)" % job, err["evalue"])
        self.assertEqual(self.signalled(victim), signal.SIGKILL)

    def test_cancel_signals_the_lock_holder(self):
        job = self.running("held", 0)
        holder = self.hold(job)
        self.running("held", holder.pid)
        msgs = self.ok("cancel('%s')" % job, timeout=90)
        holder.wait()
        self.assertEqual(holder.returncode, -signal.SIGTERM)
        # a coordinator that ends without its last word: the job is lost
        self.assertIn("job %s: lost" % job, stream_text(msgs))

    # ---- jobs() ---------------------------------------------------------------------------

    def jobs(self):
        return self.result("jobs()", timeout=120)

    def test_a_huge_state_is_one_damaged_row(self):
        good = self.folder("good", {"state": "done", "created": 946684800, "model": "fine"})
        huge = self.folder("huge", raw=b'{"state": "done", "pad": "' + b"x" * 30000000 + b'"}')
        data = self.jobs()
        self.assertRegex(data["text/plain"], r"%s\s+damaged\s+state\.json is 30,000,028 bytes" % huge)
        self.assertRegex(data["text/plain"], r"%s\s+done\s" % good)
        self.assertIn("<td>%s</td><td>damaged</td><td>state.json is 30,000,028 bytes" % huge, data["text/html"])
        self.assertIn("<td>%s</td><td>done</td>" % good, data["text/html"])
        os.unlink(os.path.join(self.jobs_dir, huge, "state.json"))

    def test_a_long_model_name_keeps_the_table(self):
        good = self.folder("good2", {"state": "done", "created": 946684800, "model": "fine"})
        long = self.folder("long-model", {"state": "done", "created": 946684801, "model": "é" * 200})
        data = self.jobs()
        self.assertIn("text/plain", data)
        for text in (data["text/plain"], data["text/html"]):
            self.assertIn(good, text)
            self.assertIn(long, text)
            self.assertIn("éééé…", text)

    def test_damaged_folders_show_as_damaged(self):
        good = self.folder("good3", {"state": "done", "created": 946684800, "model": "fine"})
        cases = {"not-json": (b"{not json", "state.json is not JSON"),
                 "array": (b"[1, 2]", "state.json is not a JSON object"),
                 "no-state": (b'{"model": "m"}', "state.json has no \"state\""),
                 "odd-state": (b'{"state": "sideways"}', "state.json's \"state\" is 'sideways'")}
        for name, (raw, why) in cases.items():
            self.folder(name, raw=raw)
        fifo = self.folder("fifo", raw=b"")
        os.unlink(os.path.join(self.jobs_dir, fifo, "state.json"))
        os.mkfifo(os.path.join(self.jobs_dir, fifo, "state.json"))
        text = result_text(self.ok("jobs()"))
        self.assertRegex(text, r"%s\s+done\s" % good)
        for name, (raw, why) in cases.items():
            self.assertRegex(text, r"job-20000101-000000-%s\s+damaged\s+%s" % (name, why.replace("(", r"\(")))
        self.assertRegex(text, r"%s\s+damaged\s+state\.json is not a regular file" % fifo)
        err = self.error("attach('%s')" % fifo, "TaasJobError")
        self.assertIn("job %s's folder is damaged: state.json is not a regular file" % fifo, err["evalue"])
        os.unlink(os.path.join(self.jobs_dir, fifo, "state.json"))

    # ---- attach() of a job that ended -------------------------------------------------------

    def test_a_failed_job_whose_error_is_damaged(self):
        null = self.folder("null-message", {"state": "failed", "error": {"ename": "TaasWorkerError", "message": None,
                                                                         "hint": None}})
        err = self.error("attach('%s')" % null, "TaasJobError")
        self.assertNotIn("(null)", err["evalue"])
        self.assertIn("job %s failed, but its state.json's error is damaged: its \"message\" is not a string"
                      % null, err["evalue"])
        empty = self.folder("empty-ename", {"state": "failed", "error": {"ename": "", "message": "boom"}})
        err = self.error("attach('%s')" % empty, "TaasJobError")
        self.assertIn("job %s failed, but its state.json's error is damaged: its \"ename\" '' is no taas error name"
                      % empty, err["evalue"])
        fine = self.folder("fine-error", {"state": "failed", "error": {"ename": "TaasWorkerError", "message": "boom",
                                                                      "hint": "look"}})
        err = self.error("attach('%s')" % fine, "TaasWorkerError")
        self.assertEqual(err["evalue"], "boom")

    def test_a_cancelled_job_says_where_it_stood(self):
        job = self.folder("cancelled", {"state": "cancelled", "epoch": 4, "epochs": 9, "step": 846, "steps": 938})
        err = self.error("attach('%s')" % job, "TaasJobError")
        self.assertIn("job %s was cancelled at epoch 4, step 846" % job, err["evalue"])
        self.assertNotIn("before it had trained a step", err["evalue"])
        ckpt = self.folder("cancelled-ckpt", {"state": "cancelled", "epoch": 2, "step": 10, "steps": 938,
                                              "checkpoint": "/x/checkpoint-1886.safetensors",
                                              "checkpoint_epoch": 3, "checkpoint_step": 10})
        err = self.error("attach('%s')" % ckpt, "TaasJobError")
        self.assertIn("job %s was cancelled at epoch 3, step 10" % ckpt, err["evalue"])
        self.assertIn("fit(..., resume='/x/checkpoint-1886.safetensors') goes on from it",
                      taastest.traceback_text(err))
        early = self.folder("cancelled-early", {"state": "cancelled"})
        err = self.error("attach('%s')" % early, "TaasJobError")
        self.assertIn("job %s was cancelled before it had trained a step" % early, err["evalue"])


if __name__ == "__main__":
    unittest.main()
