"""Jobs that survive (issue 15), through a real kernel on the local backend: a fit writes
checkpoints, a stopped job says where its last one is, fit(..., resume=PATH) goes on from it,
and a rank that dies resumes from the last checkpoint by itself, up to max_restarts. In every
case the final weights and the per-epoch checksums are byte for byte those of a run that was
never disturbed. The jobs are held by the test, never by timing (heldjob.py)."""

import glob
import hashlib
import json
import os
import re
import signal
import struct
import unittest

import taastest
from heldjob import FASHION, NET, SETUP, fit_call, gate, history, kernel_env, trainer_pids
from taastest import result_text, stream_text


def fit_cell(name, extra="", pragma=True, every="1"):
    return ("%s%s = %s\n%s\nsave(%s, '%s.safetensors')"
            % ("#pragma taas --gpus 2 --cpus 4\n" if pragma else "", name, NET, fit_call(name, extra, every), name,
               name))


@unittest.skipUnless(os.path.isdir(FASHION), "Debian's Fashion-MNIST is not installed")
class Resume(taastest.KernelCase):
    tmp_prefix = "taas-resume-"

    kernel_env = staticmethod(kernel_env)

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        reply, msgs = cls.k.execute(SETUP, timeout=30)
        assert reply["content"]["status"] == "ok", msgs
        cls.gate(True)
        reply, msgs = cls.k.execute(fit_cell("ref") + "\nh_ref", timeout=300)
        assert reply["content"]["status"] == "ok", msgs
        cls.ref = msgs

    @classmethod
    def gate(cls, open_):
        gate(cls.tmp.name, open_)

    def setUp(self):
        self.gate(False)

    def weights(self, name):
        with open(os.path.join(self.tmp.name, name + ".safetensors"), "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()

    def checksums(self, msgs):
        lines = [l for l in stream_text(msgs).splitlines() if l.startswith("done: ")]
        self.assertEqual(len(lines), 1, stream_text(msgs))
        return lines[0].split("; ")[-1]

    def history(self, msgs):
        return history(result_text(msgs))

    def same_as_undisturbed(self, name, msgs, history):
        """The run's checksums (msgs, its cell's) and History (history, a cell that shows it)
        and its weights are the undisturbed run's."""
        self.assertEqual(self.checksums(msgs), self.checksums(self.ref))
        self.assertRegex(self.checksums(msgs), r"epoch 1 10,000 0x[0-9a-f]{16}, epoch 2 10,000 0x[0-9a-f]{16}$")
        self.assertEqual(self.history(history), self.history(self.ref))
        self.assertEqual(self.weights(name), self.weights("ref"))

    def checkpoints(self):
        return glob.glob(os.path.join(self.tmp.name, "jobs", "taas-job-*", "checkpoint-*.safetensors"))

    def leftovers(self):
        """What is in the kernel's and the workers' $TMPDIR but the job folders (which keep
        the checkpoints a stopped job names): the ranks' temporary files, if any."""
        return sorted(n for n in os.listdir(os.path.join(self.tmp.name, "jobs")) if not n.startswith("taas-job-"))

    def assert_no_leftovers(self, before):
        """Once the ranks are gone, $TMPDIR holds what it held before the fault (issue 27)."""
        self.assertTrue(taastest.wait_until(lambda: not trainer_pids(self.k.pid), 60), "ranks were left")
        # (mpirun's session folder goes when mpirun has ended, after its ranks)
        taastest.wait_until(lambda: self.leftovers() == before, 30)
        self.assertEqual(self.leftovers(), before)

    def stopped_checkpoint(self, name, cell=None):
        """The checkpoint of a job held at step 1 and stopped there."""
        msg_id = self.start_held(name, cell=cell)
        self.k.request("control", "interrupt_request")
        self.assertEqual(self.k.reply(msg_id, timeout=30)["content"]["ename"], "KeyboardInterrupt")
        return re.search(r"resume='(\S+)'", stream_text(self.k.iopub(msg_id), "stderr")).group(1)

    def with_record(self, path, name, **change):
        """A copy of the checkpoint at path (tmp/name) whose record has change."""
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
            data = f.read()
        record = json.loads(header["__metadata__"]["taas.checkpoint"])
        record.update(change)
        header["__metadata__"]["taas.checkpoint"] = json.dumps(record)
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        out = os.path.join(self.tmp.name, name)
        with open(out, "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text + data)
        return out

    def start_held(self, name, extra="", cell=None):
        """A job held at step 1 with its first checkpoint written: the cell's msg_id."""
        before = set(self.checkpoints())
        msg_id = self.k.send("shell", "execute_request", {"code": cell or fit_cell(name, extra), "silent": False,
                                                          "store_history": True, "user_expressions": {},
                                                          "allow_stdin": False, "stop_on_error": True})
        self.assertTrue(taastest.wait_until(lambda: set(self.checkpoints()) - before, 120), "no checkpoint came")
        return msg_id

    def test_1_stop_then_resume_by_hand(self):
        before = self.leftovers()
        msg_id = self.start_held("a")
        self.k.request("control", "interrupt_request")
        reply = self.k.reply(msg_id, timeout=30)
        self.assertEqual(reply["content"]["ename"], "KeyboardInterrupt")
        self.assert_no_leftovers(before)  # a fit stopped
        err = stream_text(self.k.iopub(msg_id), "stderr")
        m = re.search(r"the last checkpoint is (\S+) \(epoch 1, step 1\): fit\(\.\.\., resume='(\S+)'\) goes on "
                      r"from it\n", err)
        self.assertTrue(m, err)
        path = m.group(2)
        self.assertEqual(m.group(1), path)
        self.assertTrue(os.path.isfile(path))
        # it records the kernel set it was trained with, and the resumed job keeps it
        self.assertEqual(taastest.checkpoint_record(path)["kernels"], taastest.best_kernels())
        self.gate(True)
        msgs = self.ok(fit_cell("b", ", resume='%s'" % path) + "\nh_b", timeout=300)
        self.assertIn("kernels: %s on every rank (%s)\n" % (taastest.best_kernels(), taastest.kernels_why(
            "the checkpoint's, which the fit goes on from")), stream_text(msgs))
        self.same_as_undisturbed("b", msgs, msgs)
        self.assert_no_leftovers(before)  # a fit resumed to its end
        self.ok("c = %s\nload('%s', into=c)" % (NET, path))

    def test_2_a_killed_rank_resumes_by_itself(self):
        before = self.leftovers()
        msg_id = self.start_held("k")
        victims = trainer_pids(self.k.pid)
        self.assertEqual(len(victims), 2)
        self.gate(True)  # the loaders the restart makes are not held
        os.kill(victims[1], signal.SIGKILL)
        reply = self.k.reply(msg_id, timeout=300)
        msgs = self.k.iopub(msg_id)
        self.assertEqual(reply["content"]["status"], "ok", stream_text(msgs, "stderr"))
        self.assertRegex(stream_text(msgs, "stderr"), r"trainer rank \d on \S+ \(pid %d\) exited on signal 9 "
                                                      r"\(Killed\); resuming from step 1 \(epoch 1\), restart 1 of 3\n"
                                                      % victims[1])
        self.same_as_undisturbed("k", msgs, self.ok("h_k"))
        self.assert_no_leftovers(before)  # a rank SIGKILLed mid-fit

    def test_3_the_job_stops_after_max_restarts(self):
        msg_id = self.start_held("m")  # max_restarts=3, as torchrun's default
        seen = set()
        for _ in range(4):  # each generation of ranks is held at step 1 too: kill one of it
            def new_ranks():
                fresh = [p for p in trainer_pids(self.k.pid) if p not in seen]
                return fresh if len(fresh) == 2 else None
            pids = taastest.wait_until(new_ranks, 120)
            if not pids:  # what the cell said tells why
                self.fail("no new ranks came: %s" % stream_text(self.k.iopub_now(msg_id, 1), "stderr"))
            seen.update(pids)
            os.kill(pids[0], signal.SIGKILL)
        reply = self.k.reply(msg_id, timeout=120)
        self.assertEqual(reply["content"]["status"], "error")
        err = taastest.error_of(self.k.iopub(msg_id))
        # a rank killed before mpirun knew it by rank is named by mpirun's status instead
        self.assertRegex(err["evalue"], r"exited on signal 9 \(Killed\)( \(mpirun's exit status 137\))?, after 3 "
                                        r"restarts: the job stops")
        self.assertIn("max_restarts=3", taastest.traceback_text(err))

    def test_5_a_death_before_the_first_checkpoint_starts_again(self):
        msg_id = self.k.send("shell", "execute_request", {"code": fit_cell("n", every="10**12"), "silent": False,
                                                          "store_history": True, "user_expressions": {},
                                                          "allow_stdin": False, "stop_on_error": True})
        # held at step 1: loader 3 never starts; no checkpoint is ever due
        victims = taastest.wait_until(lambda: trainer_pids(self.k.pid) if len(trainer_pids(self.k.pid)) == 2
                                      else None, 120)
        self.assertTrue(victims, "the ranks did not start")
        self.gate(True)
        os.kill(victims[0], signal.SIGKILL)
        reply = self.k.reply(msg_id, timeout=300)
        msgs = self.k.iopub(msg_id)
        self.assertEqual(reply["content"]["status"], "ok", stream_text(msgs, "stderr"))
        # (its pid when its hello came before it died; a rank killed before mpirun knew it by
        # rank is named by mpirun's status instead, as in test_4)
        self.assertRegex(stream_text(msgs, "stderr"), r"(trainer rank \d on \S+( \(pid \d+\))?|a trainer rank) exited "
                                                      r"on signal 9 \(Killed\)( \(mpirun's exit status 137\))?; "
                                                      r"starting again \(no checkpoint yet\), restart 1 of 3\n")
        self.same_as_undisturbed("n", msgs, self.ok("h_n"))

    def test_7_a_checkpoint_keeps_its_kernels(self):
        """A checkpoint resumed where a rank's host runs a lower kernel set (TAAS_CPU for the
        workers only) is the job's error before any step, naming the rank and its host."""
        before = self.leftovers()
        msg_id = self.start_held("v")
        self.k.request("control", "interrupt_request")
        self.assertEqual(self.k.reply(msg_id, timeout=30)["content"]["ename"], "KeyboardInterrupt")
        err = stream_text(self.k.iopub(msg_id), "stderr")
        m = re.search(r"resume='(\S+)'\) goes on from it\n", err)
        self.assertTrue(m, err)
        best, low = taastest.best_kernels(), taastest.lower_kernels()
        cpu = os.path.join(self.tmp.name, "cpu")
        with open(cpu, "w") as f:
            f.write(low)
        try:
            reply, msgs = self.k.execute(fit_cell("w", ", resume='%s'" % m.group(1)), timeout=120)
        finally:
            os.unlink(cpu)
        self.assertEqual(reply["content"]["status"], "error", stream_text(msgs))
        e = taastest.error_of(msgs)
        self.assertEqual(e["ename"], "TaasOffloadError")
        self.assertRegex(e["evalue"], r"^rank \d on \S+ cannot run the %s kernels the job asks for \(%s\): its CPU "
                                      r"runs up to %s$" % (best, re.escape(taastest.kernels_why(
                                          "the checkpoint's, which the fit goes on from")), low))
        self.assertIn("name a set every rank's host runs", taastest.traceback_text(e))
        self.assert_no_leftovers(before)  # ranks that refuse a resume

    def test_6_the_kernel_answers_while_a_job_stops(self):
        """The stop button does not hold the kernel's loop while the job is torn down (issue
        16, item 8): with both ranks stopped (SIGSTOP) the stop waits for their last weights
        (TAAS_STOP_GRACE_S of this kernel: 600 s), and meanwhile control answers and the
        heartbeat echoes; once they go on, the cell ends with KeyboardInterrupt."""
        msg_id = self.start_held("z")
        ranks = trainer_pids(self.k.pid)
        self.assertEqual(len(ranks), 2)
        for p in ranks:
            os.kill(p, signal.SIGSTOP)
        try:
            self.k.request("control", "interrupt_request", timeout=30)
            info, _ = self.k.request("control", "kernel_info_request", timeout=30)
            self.assertEqual(info["content"]["status"], "ok")
            with self.assertRaises(TimeoutError):  # still stopping: the ranks cannot answer
                self.k.reply(msg_id, timeout=0.2)
        finally:
            for p in ranks:
                os.kill(p, signal.SIGCONT)
        reply = self.k.reply(msg_id, timeout=60)
        self.assertEqual(reply["content"]["ename"], "KeyboardInterrupt")
        self.assertTrue(taastest.wait_until(lambda: not trainer_pids(self.k.pid), 30))

    def test_4_bad_checkpoints_are_refused_and_nothing_is_touched(self):
        self.ok("save(ref, 'plain.safetensors')")
        weights_before = self.weights("ref")
        plain = os.path.join(self.tmp.name, "plain.safetensors")
        err = self.error(fit_cell("x", ", resume='plain.safetensors'", pragma=False), "TaasValueError")
        self.assertIn("plain.safetensors holds weights but is not a checkpoint", err["evalue"])
        msg_id = self.start_held("y")
        self.k.request("control", "interrupt_request")
        self.k.reply(msg_id, timeout=30)
        path = re.search(r"resume='(\S+)'", stream_text(self.k.iopub(msg_id), "stderr")).group(1)
        with open(path, "rb") as f:
            whole = f.read()
        cut = os.path.join(self.tmp.name, "cut.safetensors")
        with open(cut, "wb") as f:
            f.write(whole[:len(whole) // 2])
        err = self.error(fit_cell("x", ", resume='cut.safetensors'"), "TaasDataError")
        self.assertIn("cut.safetensors", err["evalue"])
        other = "Sequential(Flatten(), Linear(784, 10), LogSoftmax(dim=1))"
        err = self.error("o = %s\nfit(o, train, epochs=2, loss=NLLLoss(), optimizer=Adam(lr=0.002), resume='%s')"
                         % (other, path), "TaasValueError")
        self.assertRegex(err["evalue"], r"fit\(\) resume: .* does not fit the model")
        err = self.error(fit_cell("x", ", resume='%s'" % path).replace("seed=11", "seed=12"), "TaasValueError")
        self.assertIn("the checkpoint was made with seed 11; this fit has 12", err["evalue"])
        self.assertEqual(self.weights("ref"), weights_before)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), whole)
        self.assertTrue(os.path.isfile(plain))

    def test_8_a_bad_record_is_refused_by_field_and_file(self):
        """Every field of a checkpoint's record is checked (issue 27): by the kernel where it
        knows the fit, by the ranks against the rest; the error names the field and the
        user's file (never a rank's copy of it) and blames no version."""
        path = self.stopped_checkpoint("r")
        for change, want in [({"lr": "fast"}, r'"lr" is "fast"; it must be a number >= 0'),
                             ({"epoch": 10 ** 18}, r'"epoch" is 1000000000000000000; it must be a whole number'),
                             ({"step": -1}, r'"step" is -1'),
                             ({"step": 10 ** 18}, r'"step" is 1000000000000000000'),
                             ({"epoch_checksum": "0xnothex"}, r'"epoch_checksum" is "0xnothex"'),
                             ({"history": "junk"}, r'"history" is "junk"')]:
            self.with_record(path, "bad.safetensors", **change)
            err = self.error(fit_cell("x", ", resume='bad.safetensors'"), "TaasValueError")
            self.assertRegex(err["evalue"], r"^fit\(\) resume: bad\.safetensors: the checkpoint record's %s" % want)
            self.assertNotIn("version", taastest.traceback_text(err))

    def test_80_a_rank_that_refuses_a_resume_names_the_users_file(self):
        """What only the ranks know (their steps per epoch) is checked there: the error names
        the user's file, not the rank's copy of it, and the ranks leave no file behind."""
        path = self.stopped_checkpoint("r2")
        before = self.leftovers()
        bad = self.with_record(path, "bad.safetensors", steps_per_epoch=60, step=55)
        reply, msgs = self.k.execute(fit_cell("x", ", resume='bad.safetensors'"), timeout=120)
        self.assertEqual(reply["content"]["status"], "error", stream_text(msgs))
        err = taastest.error_of(msgs)
        self.assertIn("%s: the checkpoint was made with steps per epoch 60; this fit has 50" % bad, err["evalue"])
        self.assertNotIn("taas-weights", taastest.traceback_text(err))
        self.assertNotIn("/proc/", taastest.traceback_text(err))
        self.assert_no_leftovers(before)  # ranks that refuse a resume

    def test_90_another_optimizer_is_named(self):
        """An SGD checkpoint resumed with Adam: the optimizer is named, not the tensors."""
        sgd = fit_cell("s").replace("Adam(lr=0.002)", "SGD(lr=0.01, momentum=0.9)")
        path = self.stopped_checkpoint("s", cell=sgd)
        err = self.error(fit_cell("x", ", resume='%s'" % path), "TaasValueError")
        self.assertIn("the checkpoint's optimizer is SGD; this fit's is Adam", err["evalue"])
        self.assertNotIn("does not fit the model", err["evalue"])
        self.assertIn("optimizer=SGD(...)", taastest.traceback_text(err))

    def test_91_kernel_shutdown_leaves_nothing(self):
        """A kernel shut down while its job runs: the ranks' temporary files go with them."""
        before = self.leftovers()
        env = dict(os.environ, TAAS_WORKER=os.path.join(self.tmp.name, "taas-worker"),
                   TMPDIR=os.path.join(self.tmp.name, "jobs"), TAAS_STOP_GRACE_S="600")
        k = taastest.Kernel(cwd=self.tmp.name, env=env)
        try:
            reply, msgs = k.execute(SETUP, timeout=30)
            self.assertEqual(reply["content"]["status"], "ok", msgs)
            ckpts = set(self.checkpoints())
            k.send("shell", "execute_request", {"code": fit_cell("q"), "silent": False, "store_history": True,
                                                "user_expressions": {}, "allow_stdin": False,
                                                "stop_on_error": True})
            self.assertTrue(taastest.wait_until(lambda: set(self.checkpoints()) - ckpts, 120), "no checkpoint came")
            ranks = trainer_pids(k.pid)
            self.assertEqual(len(ranks), 2)
        finally:
            k.close()
        self.assertTrue(taastest.wait_until(lambda: not any(os.path.exists("/proc/%d" % p) for p in ranks), 60))
        taastest.wait_until(lambda: self.leftovers() == before, 30)
        self.assertEqual(self.leftovers(), before)


if __name__ == "__main__":
    unittest.main()
