"""A loader pool that sizes itself, the cost before launch and a budget (issue 18), through a
real kernel, mpirun and loader workers. The slow source is the test's own HTTP server
(tests/lib/faultserver.py) with a delay before every answer, and an NpyDataset whose every
sample is one range request (TAAS_NPY_MEMORY_LIMIT below the file, the fetch cache off): a
loader worker makes at most its threads / delay samples a second, whatever the machine, so
the ranks of a one-layer model always outrun one of them.

- --cpus auto:3 over the slow source grows the pool (the change and its reason are shown, the
  History has the pool by epoch), a loader of the grown pool killed as soon as it exists is
  replaced, and the weights are byte for byte those of --cpus 1.
- --cpus auto:3 over a fast local source keeps one loader, weights equal to --cpus 2.
- the cost line with prices and without, and from the last run of the same cell.
- --budget as a time and as money stops a job that would run far longer (its length has a
  floor set by the server's delay): the fit returns its History, the model has the weights
  of the last step, the display and the summary say why. A budget that ends the job before its
  first step, money without prices, a negative price: clear errors."""

import hashlib
import json
import os
import re
import signal
import threading
import time
import unittest

import taastest
from taastest import error_of, result_text, stream_text, traceback_text

N = 1536          # samples: 24 steps of 2 ranks x 32
DELAY = 0.005     # seconds before every answer of the server
LINEAR = "Sequential(Flatten(), Linear(784, 10), LogSoftmax(dim=1))"
CONV = ("Sequential(Conv2d(1, 16, 3), ReLU(), Conv2d(16, 16, 3), ReLU(), MaxPool2d(2), Flatten(), "
        "Linear(2304, 10), LogSoftmax(dim=1))")
CONFIG = {"configurations": {
    "g2.2": {"gpus": 2, "cpus": 2, "price_per_hour": 1800},
    "c1.4": {"gpus": 0, "cpus": 4, "price_per_hour": 1800},
    "free": {"gpus": 2, "cpus": 2}}}


def kernel_env(tmp):
    return {"TAAS_CACHE_DIR": "", "TAAS_NPY_MEMORY_LIMIT": "1K", "TAAS_JOBS_DIR": os.path.join(tmp, "jobs"),
            "TAAS_CONFIG": os.path.join(tmp, "config.json")}


def fit_cell(name, flags, loader, net=LINEAR, epochs=2, header="", tail=""):
    return ("%s#pragma taas --gpus 2 %s\n"
            "%s = %s\n"
            "h_%s = fit(%s, %s, epochs=%d, loss=NLLLoss(), optimizer=Adam(lr=0.002), seed=5)\n"
            "save(%s, '%s.safetensors')%s"
            % (header, flags, name, net, name, name, loader, epochs, name, name, tail))


class Pool(taastest.KernelCase):
    tmp_prefix = "taas-pool-"
    kernel_env = staticmethod(kernel_env)

    @classmethod
    def setUpClass(cls):
        cls.data = __import__("tempfile").TemporaryDirectory(prefix="taas-pool-data-")
        cls.server, url = taastest.slow_npy_source(cls.data.name, N, DELAY)
        super().setUpClass()
        with open(os.path.join(cls.tmp.name, "config.json"), "w") as f:
            json.dump(CONFIG, f)
        reply, msgs = cls.k.execute(
            "slow = DataLoader(NpyDataset('%simages.npy', '%slabels.npy', transform=ToTensor()), batch_size=32, "
            "shuffle=True, num_workers=2)\n"
            "fast = DataLoader(NpyDataset('%s/images.npy', '%s/labels.npy', transform=ToTensor()), batch_size=32, "
            "shuffle=True)\n"
            "register(slow)\nregister(fast)" % (url, url, cls.data.name, cls.data.name), timeout=60)
        assert reply["content"]["status"] == "ok", msgs

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.server.terminate()
        cls.server.wait()
        cls.data.cleanup()

    def weights(self, name):
        with open(os.path.join(self.tmp.name, name + ".safetensors"), "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()

    def error(self, code, ename, timeout=60):
        reply, msgs = self.k.execute(code, timeout=timeout)
        self.assertEqual(reply["content"]["status"], "error", msgs)
        self.assertEqual(reply["content"]["ename"], ename, traceback_text(error_of(msgs)))
        return traceback_text(error_of(msgs))

    def last_display(self, msgs):
        shown = [m for m in msgs if m["msg_type"] in ("display_data", "update_display_data")]
        return shown[-1]["content"]["data"]["text/plain"]

    def test_1_a_slow_source_grows_the_pool_and_changes_no_weight(self):
        # a loader of the grown pool (worker 1 or 2: the pool starts with worker 0 alone) is
        # killed as soon as its process exists: its replacement takes over
        killed = []
        done = threading.Event()

        def killer():
            while not done.is_set() and not killed:
                for pid, (ppid, args) in taastest.processes().items():
                    if ppid == self.k.pid and " loader " in args and re.search(r"--worker [12]\b", args):
                        os.kill(pid, signal.SIGKILL)
                        killed.append(pid)
                        break
                time.sleep(0.01)
        t = threading.Thread(target=killer)
        t.start()
        try:
            msgs = self.ok(fit_cell("a", "--cpus auto:3", "slow") + "\nh_a", timeout=300)
        finally:
            done.set()
            t.join()
        out, err = stream_text(msgs), stream_text(msgs, "stderr")
        self.assertIn("plan: 1 machine × 2 GPUs, 1 to 3 loader workers (auto) for 'slow', no sample limit\n", out)
        grew = re.search(r"^loaders 1 → ([23]): the ranks waited for data (\d+)% of the time over the last (\d+) "
                         r"steps \(epoch 1 step \d+\)$", out, re.M)
        self.assertTrue(grew, out)
        self.assertGreater(int(grew.group(2)), 2)
        self.assertGreaterEqual(int(grew.group(3)), 3)
        self.assertTrue(killed, "no loader of the grown pool was seen")
        self.assertRegex(err, r"\[loader slow\.[12]\] died \((pid %d on .*|before it joined the job), signal 9 "
                              r"\(Killed\)\); a replacement takes over" % killed[0])
        # the display: the pool's size and why it changed
        self.assertRegex(out, r"loaders 1 → [23]: .*\n(loaders \d → \d: .*\n)*")
        self.assertRegex(self.last_display(msgs), r"loaders \d/[123] \(auto: \d → \d: ")
        # the History: the pool by epoch, "1→3" in the first
        history = result_text(msgs)
        self.assertRegex(history.splitlines()[1], r"loaders$")
        self.assertRegex(history.splitlines()[2], r"\s1→[23](→\d)*$")
        self.assertRegex(out, r"; loaders at the end [123], \d+ changes? of the pool")
        self.ok(fit_cell("a1", "--cpus 1", "slow"), timeout=300)
        self.assertEqual(self.weights("a"), self.weights("a1"))

    def test_2_a_fast_source_keeps_one_loader(self):
        msgs = self.ok(fit_cell("f", "--cpus auto:3", "fast", net=CONV, epochs=1) + "\nh_f", timeout=300)
        out = stream_text(msgs)
        self.assertNotIn("loaders 1 →", out)
        self.assertRegex(out, r"; loaders at the end 1, 0 changes of the pool")
        self.assertRegex(result_text(msgs).splitlines()[2], r"\s1$")
        self.ok(fit_cell("f2", "--cpus 2", "fast", net=CONV, epochs=1), timeout=300)
        self.assertEqual(self.weights("f"), self.weights("f2"))

    def test_3_the_cost_line_with_prices_without_and_from_the_last_run(self):
        cell = fit_cell("p", "--cpus 1", "fast", epochs=1)
        out = stream_text(self.ok(cell, timeout=300))
        self.assertIn("\ncost: estimated after the first steps (no earlier run of this cell); no prices "
                      "(price_per_hour in the configuration file): the size in machine-hours\n", out)
        self.assertRegex(out, r"; [0-9.]+ machine-hours of the ranks' machines, [0-9.]+ of loader machines;")
        out = stream_text(self.ok(cell, timeout=300))
        self.assertRegex(out, r"\ncost: about \d+ s, [0-9.]+ machine-hours \(from the last run of this cell\); ")
        out = stream_text(self.ok(fit_cell("q", "--cpus 2", "fast", epochs=1, header="#!g2.2\n"), timeout=300))
        self.assertIn("cost: estimated after the first steps (no earlier run of this cell); at your prices: "
                      "1 × g2.2 1800.00/h + 2 × c1.4 1800.00/h\n", out)
        self.assertRegex(out, r"; cost [0-9.]+; [0-9.]+ machine-hours of the ranks' machines")

    def test_4_a_time_budget_stops_the_job_with_its_weights(self):
        # 20 epochs of the slow source take at least 20 x 1,536 x 5 ms / 2 threads = 77 s
        msgs = self.ok(fit_cell("b", "--cpus 1 --budget 8s", "slow", epochs=20, tail="\nh_b"), timeout=300)
        err, out = stream_text(msgs, "stderr"), stream_text(msgs)
        self.assertRegex(err, r"the budget \(--budget 8s\) is used up after \d s, at epoch \d+ step \d+ \(\d+% of the "
                              r"job\): stopping after the step in progress\n")
        self.assertIn("stopped by its budget after", self.last_display(msgs))
        self.assertRegex(out, r"; stopped: the budget \(--budget 8s\) is used up")
        self.assertTrue(result_text(msgs).startswith("History ("), result_text(msgs))
        # the model has the weights of the last step: saved above, and evaluate uses them
        self.assertTrue(os.path.getsize(os.path.join(self.tmp.name, "b.safetensors")) > 0)
        self.assertIn("accuracy=", result_text(self.ok("evaluate(b, fast)", timeout=120)))

    def test_5_a_money_budget_stops_the_job(self):
        # g2.2 and one c1.4 at 1,800 an hour each: one a second
        msgs = self.ok(fit_cell("m", "--cpus 1 --budget 8", "slow", epochs=20, header="#!g2.2\n", tail="\nh_m"),
                       timeout=300)
        self.assertIn("at your prices: 1 × g2.2 1800.00/h + 1 × c1.4 1800.00/h; budget 8\n", stream_text(msgs))
        self.assertRegex(stream_text(msgs, "stderr"), r"the budget \(--budget 8\) is used up: [78]\.\d\d spent, at "
                                                      r"epoch \d+ step \d+")
        self.assertTrue(result_text(msgs).startswith("History ("))

    def test_7_a_detached_job_keeps_auto_and_its_budget(self):
        # its coordinator reads the pragma again: the pool sizes itself, and the budget stops it
        # (20 epochs take at least 20 x 1,536 x 5 ms / (3 loaders x 2 threads) = 26 s)
        msgs = self.ok(fit_cell("d", "--cpus auto:3 --budget 15s --detach", "slow", epochs=20, tail="\nh_d"),
                       timeout=300)
        out = stream_text(msgs)
        self.assertIn("1 to 3 loader workers (auto) for 'slow'", out)
        self.assertIn("; budget 15s\n", out)
        self.assertRegex(out, r"loaders 1 → [23]: ")
        self.assertRegex(stream_text(msgs, "stderr"), r"the budget \(--budget 15s\) is used up after")
        self.assertTrue(result_text(msgs).startswith("History ("), result_text(msgs))

    def test_6_budget_errors(self):
        tb = self.error(fit_cell("e", "--cpus 1 --budget 0.001", "slow", header="#!g2.2\n"), "TaasJobError")
        self.assertIn("before rank 0 sent the weights of a step: nothing was trained", tb)
        self.assertIn("give a larger --budget", tb)
        tb = self.error(fit_cell("e", "--budget 5", "slow"), "TaasPragmaError")
        self.assertIn("--budget 5 is an amount of money, but no machine of this job has a price", tb)
        self.assertIn("--budget 2h", tb)
        # the budget as written, never a rounding of it (it was 9.0072e+15, and "--budget 1 s")
        tb = self.error(fit_cell("e", "--budget 9_007_199_254_740_992", "slow"), "TaasPragmaError")
        self.assertIn("--budget 9007199254740992 is an amount of money", tb)
        tb = self.error(fit_cell("e", "--cpus 1 --budget 0.000001s", "slow"), "TaasJobError")
        self.assertIn("the budget (--budget 0.000001s) is used up", tb)
        # a negative price: the file is wrong for every configuration, and says where
        path = os.path.join(self.tmp.name, "config.json")
        bad = dict(CONFIG["configurations"], neg={"gpus": 2, "cpus": 2, "price_per_hour": -2})
        with open(path, "w") as f:
            json.dump({"configurations": bad}, f)
        try:
            tb = self.error(fit_cell("e", "--cpus 1", "slow", header="#!g2.2\n"), "TaasConfigError")
        finally:
            with open(path, "w") as f:
                json.dump(CONFIG, f)
        self.assertIn("configuration 'neg': \"price_per_hour\" is -2", tb)
        tb = self.error(fit_cell("e", "--budget -3", "slow"), "TaasPragmaError")
        self.assertIn("--budget", tb)
        # nothing ran: no job folder, no worker left
        self.assertFalse([p for p, (pp, a) in taastest.processes().items() if pp == self.k.pid and "taas-worker" in a])


if __name__ == "__main__":
    unittest.main()
