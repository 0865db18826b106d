"""Detached jobs (issue 15): a fit in a `#pragma taas --detach` cell runs under a coordinator
of its own and outlives the kernel. Through real kernels: the kernel is restarted (jupyter_client's
restart) or shut down mid-job, and a new one lists the job with jobs() and attach() shows it
and returns a History (and weights) equal to an undetached run's; the stop button only
detaches; cancel() stops a job; a coordinator that is killed is told as lost; bad ids, bad
models and bad folders are clear errors. The jobs are held by the test (heldjob.py)."""

import glob
import hashlib
import json
import os
import re
import shutil
import signal
import unittest

import taastest
from heldjob import FASHION, NET, SETUP, fit_call, gate, history, kernel_env, release_held, trainer_pids
from taastest import error_of, result_text, stream_text, traceback_text

PRAGMA = "#pragma taas --gpus 2 --cpus 4"


def env_of(tmp):
    env = kernel_env(tmp)
    env["TAAS_JOBS_DIR"] = os.path.join(tmp, "detached")
    return env


@unittest.skipUnless(os.path.isdir(FASHION), "Debian's Fashion-MNIST is not installed")
class Detach(taastest.KernelCase):
    tmp_prefix = "taas-detach-"
    kernel_env = staticmethod(env_of)

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.setup_session(cls.k)
        gate(cls.tmp.name, True)
        reply, msgs = cls.k.execute("%s\nref = %s\n%s\nsave(ref, 'ref.safetensors')\nh_ref"
                                    % (PRAGMA, NET, fit_call("ref")), timeout=300)
        assert reply["content"]["status"] == "ok", msgs
        cls.ref = msgs

    @staticmethod
    def setup_session(k):
        reply, msgs = k.execute(SETUP, timeout=30)
        assert reply["content"]["status"] == "ok", msgs

    def setUp(self):
        gate(self.tmp.name, False)

    @property
    def jobs_dir(self):
        return os.path.join(self.tmp.name, "detached")

    def new_kernel(self):
        """A fresh kernel in place of the class's, which was shut down."""
        type(self).k = taastest.Kernel(cwd=self.tmp.name, env=dict(os.environ, **self.env()))
        return self.k

    def env(self):
        return {"TAAS_WORKER": os.path.join(self.tmp.name, "taas-worker"), "TMPDIR": os.path.join(self.tmp.name, "jobs"),
                "TAAS_JOBS_DIR": self.jobs_dir}

    def weights(self, name):
        with open(os.path.join(self.tmp.name, name + ".safetensors"), "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()

    def state(self, job):
        with open(os.path.join(self.jobs_dir, job, "state.json")) as f:
            return json.load(f)

    def start_held(self, name):
        """A detached fit held at step 1 with its first checkpoint written: (msg_id, job id)."""
        before = set(os.listdir(self.jobs_dir)) if os.path.isdir(self.jobs_dir) else set()
        code = "%s --detach\n%s = %s\n%s" % (PRAGMA, name, NET, fit_call(name))
        msg_id = self.k.send("shell", "execute_request", {"code": code, "silent": False, "store_history": True,
                                                          "user_expressions": {}, "allow_stdin": False,
                                                          "stop_on_error": True})

        def held():  # the checkpoint is on disk and the job's state names it
            fresh = set(os.listdir(self.jobs_dir)) - before if os.path.isdir(self.jobs_dir) else set()
            for job in fresh:
                try:
                    if glob.glob(os.path.join(self.jobs_dir, job, "checkpoint-*.safetensors")) and \
                            self.state(job).get("checkpoint"):
                        return job
                except (OSError, ValueError):  # state.json not there yet
                    pass
            return None
        job = taastest.wait_until(held, 120)
        self.assertTrue(job, "no checkpoint came: %s" % stream_text(self.k.iopub_now(msg_id, 1), "stderr"))
        return msg_id, job

    def attach_and_compare(self, job):
        """attach() in the current kernel: the History and the weights are the undetached run's."""
        msgs = self.ok("d = %s\nh_d = attach('%s', into=d)\nsave(d, 'd.safetensors')\nh_d" % (NET, job), timeout=300)
        self.assertEqual(history(result_text(msgs)), history(result_text(self.ref)))
        self.assertEqual(self.weights("d"), self.weights("ref"))
        # what it printed while no one looked is shown, and its display
        self.assertRegex(stream_text(msgs), r"done: 2 epochs, 100 steps on 2 ranks")
        self.assertTrue(taastest.only(msgs, "display_data"))
        return msgs

    def test_1_kernel_restart_mid_job_then_attach(self):
        msg_id, job = self.start_held("a")
        self.k.km.restart_kernel(now=False)
        self.k.kc.wait_for_ready(timeout=30)
        self.k.drain(0.3)
        self.assertEqual(self.state(job)["state"], "running")  # the kernel's end did not end it
        listed = result_text(self.ok("jobs()"))
        self.assertRegex(listed, r"%s\s+running\s+epoch 1/2, step \d+/50\s+a\s" % job)
        self.assertIn("1 machine × 2 GPUs", listed)
        release_held(self.tmp.name)
        self.attach_and_compare(job)
        self.assertRegex(result_text(self.ok("jobs()")), r"%s\s+done\s" % job)
        # a job that ended long ago gives its History and weights again
        msgs = self.ok("e = %s\nh_e = attach('%s', into=e)\nsave(e, 'e.safetensors')\nh_e" % (NET, job))
        self.assertEqual(history(result_text(msgs)), history(result_text(self.ref)))
        self.assertEqual(self.weights("e"), self.weights("ref"))
        self.setup_session(self.k)

    def test_2_kernel_shutdown_mid_job_then_a_fresh_kernel_fetches_it(self):
        msg_id, job = self.start_held("b")
        self.k.close()
        self.assertEqual(self.state(job)["state"], "running")
        release_held(self.tmp.name)
        self.new_kernel()
        self.attach_and_compare(job)
        self.setup_session(self.k)

    def test_3_the_stop_button_detaches_and_cancel_stops(self):
        msg_id, job = self.start_held("c")
        self.k.request("control", "interrupt_request")
        reply = self.k.reply(msg_id, timeout=30)
        self.assertEqual(reply["content"]["ename"], "KeyboardInterrupt")
        err = stream_text(self.k.iopub(msg_id), "stderr")
        self.assertIn("detached from job %s: it keeps running; attach('%s', into=c) shows it again, cancel('%s') "
                      "stops it" % (job, job, job), err)
        self.assertEqual(self.state(job)["state"], "running")
        coordinator = self.state(job)["pid"]
        ranks = trainer_pids(coordinator)
        self.assertEqual(len(ranks), 2)
        msgs = self.ok("cancel('%s')" % job[:-2])  # the start of one id names it
        self.assertIn("job %s: cancelled" % job, stream_text(msgs))
        self.assertEqual(self.state(job)["state"], "cancelled")
        self.assertTrue(taastest.wait_until(lambda: not any(map(taastest.pid_alive, ranks + [coordinator])), 30))
        self.assertRegex(result_text(self.ok("jobs()")), r"%s\s+cancelled\s" % job)
        err = self.error("attach('%s')" % job, "TaasJobError")
        self.assertIn("job %s was cancelled" % job, err["evalue"])
        err = self.error("cancel('%s')" % job, "TaasJobError")
        self.assertIn("job %s has already ended (cancelled)" % job, err["evalue"])

    def test_4_a_killed_coordinator_is_lost(self):
        msg_id, job = self.start_held("l")
        self.k.request("control", "interrupt_request")
        self.k.reply(msg_id, timeout=30)
        os.kill(self.state(job)["pid"], signal.SIGKILL)
        err = self.error("attach('%s')" % job, "TaasJobError")
        self.assertRegex(err["evalue"], r"job %s lost its coordinator \(pid \d+\)" % job)
        self.assertRegex(traceback_text(err), r"its last checkpoint is \S+/checkpoint-\d+\.safetensors: "
                                              r"fit\(\.\.\., resume='\S+'\) goes on from it")
        self.assertRegex(result_text(self.ok("jobs()")), r"%s\s+lost\s" % job)

    def test_5_bad_ids_models_and_folders(self):
        err = self.error("attach('nope')", "TaasValueError")
        self.assertIn("there is no job 'nope'", err["evalue"])
        err = self.error("attach('../../etc')", "TaasValueError")
        self.assertIn("'../../etc' is not a job id", err["evalue"])
        err = self.error("cancel('')", "TaasValueError")
        self.assertIn("'' is not a job id", err["evalue"])
        err = self.error("attach(3)", "TaasTypeError")
        err = self.error("#pragma taas --gpus 2 --detach=yes\nx = 1", "TaasPragmaError")
        self.assertIn("--detach takes no value", err["evalue"])
        # a folder that is not a job, and a job whose files are damaged: listed or skipped, never a crash
        os.makedirs(os.path.join(self.jobs_dir, "job-junk"), exist_ok=True)
        damaged = os.path.join(self.jobs_dir, "job-20000101-000000-broken")
        os.makedirs(damaged, exist_ok=True)
        with open(os.path.join(damaged, "state.json"), "w") as f:
            f.write('{"id": "job-20000101-000000-broken", "state": "done", "done": {"history": 7}}')
        with open(os.path.join(damaged, "journal.jsonl"), "w") as f:
            f.write('not json\n{"stream": 5}\n{"display": []}\n{"stream": "stdout", "text": "hello from before"}\n')
        with open(os.path.join(damaged, "view.json"), "w") as f:
            f.write('[1, 2')
        # a FIFO in place of a job's state: never waited on, the job is one damaged row
        fifo_job = os.path.join(self.jobs_dir, "job-20000101-000000-fifo")
        os.makedirs(fifo_job, exist_ok=True)
        os.mkfifo(os.path.join(fifo_job, "state.json"))
        self.assertRegex(result_text(self.ok("jobs()")),
                         r"job-20000101-000000-fifo\s+damaged\s+state\.json is not a regular file")
        self.error("attach('job-20000101-000000-fifo')", "TaasJobError")
        shutil.rmtree(fifo_job)  # the test's own reads below would wait on it
        self.ok("jobs()")
        reply, msgs = self.k.execute("attach('job-20000101-000000-broken')")
        self.assertEqual(error_of(msgs)["ename"], "TaasJobError")
        self.assertIn("ended without a History", error_of(msgs)["evalue"])
        self.assertIn("hello from before", stream_text(msgs))
        # weights that do not fit the model are refused, and the model keeps its own
        done = [j for j in os.listdir(self.jobs_dir) if j.startswith("job-2") and
                self.state(j).get("state") == "done" and self.state(j).get("weights")]
        self.assertTrue(done, "tests 1 and 2 leave jobs that are done")
        if done:
            err = self.error("o = Sequential(Flatten(), Linear(784, 10), LogSoftmax(dim=1))\n"
                             "attach('%s', into=o)" % done[0], "TaasValueError")
            self.assertIn("weights do not fit o", err["evalue"])
            self.error("save(o, 'o.safetensors')", "TaasValueError")


if __name__ == "__main__":
    unittest.main()
