"""taas-worker train and evaluate (docs/jobspec.md) run as the kernel runs them: a job spec
file, progress as JSON lines on stdout. A small MLP on Debian's Fashion-MNIST with a units
limit of a few thousand samples: the loss goes down, the weights file reads back and
evaluates well above chance, SIGINT stops the job with its weights written, a NaN loss
names its step, and bad specs give one clear error line and exit status 1."""

import gzip
import json
import os
import re
import signal
import struct
import subprocess
import tempfile
import unittest

import taastest

FMNIST = "/usr/share/datasets/fashion-mnist"

MLP = {"type": "Sequential", "layers": [
    {"type": "Flatten"},
    {"type": "Linear", "in_features": 784, "out_features": 64},
    {"type": "ReLU"},
    {"type": "Linear", "in_features": 64, "out_features": 10},
    {"type": "LogSoftmax", "dim": 1},
]}


# two convolutions: the first by im2col (9 products an output), the second by the direct
# kernels where the set has them; their weight gradients are summed over slices of the batch
CNN = {"type": "Sequential", "layers": [
    {"type": "Conv2d", "in_channels": 1, "out_channels": 8, "kernel_size": 3},
    {"type": "ReLU"},
    {"type": "Conv2d", "in_channels": 8, "out_channels": 8, "kernel_size": 3},
    {"type": "ReLU"},
    {"type": "Flatten"},
    {"type": "Linear", "in_features": 8 * 24 * 24, "out_features": 10},
    {"type": "LogSoftmax", "dim": 1},
]}


def worker():
    return os.path.join(os.path.dirname(taastest.kernel_binary()), "taas-worker")


def loader(train, batch=64, shuffle=False):
    return {"type": "DataLoader", "batch_size": batch, "shuffle": shuffle,
            "dataset": {"type": "FashionMNIST", "root": FMNIST, "train": train,
                        "transform": {"type": "ToTensor"}}}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return header, data


class WorkerTrainTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="taas-train-test-")
        self.addCleanup(self.dir.cleanup)

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def fit_spec(self, **kw):
        spec = {"version": 1, "job": "fit", "model": MLP, "weights": None,
                "train": loader(True, shuffle=True), "validate": None, "epochs": 1,
                "units": 4000, "loss": {"type": "NLLLoss"},
                "optimizer": {"type": "SGD", "lr": 0.1}, "scheduler": None, "seed": 1,
                "threads": 2, "out": self.path("w.safetensors")}
        spec.update(kw)
        return spec

    def run_job(self, role, spec, timeout=60, env=None, clean=False):
        """clean: env is the whole environment, not added to this one."""
        p = self.path(role + ".json")
        with open(p, "w") as f:
            json.dump(spec, f)
        r = subprocess.run([worker(), role, "--spec", p], capture_output=True, text=True,
                           timeout=timeout, env=env if clean else dict(os.environ, **(env or {})))
        lines = [json.loads(l) for l in r.stdout.splitlines()]
        return r.returncode, lines, r.stderr

    def evaluate(self, weights, units=2000):
        spec = {"version": 1, "job": "evaluate", "model": MLP, "weights": weights,
                "validate": loader(False, batch=250), "units": units,
                "loss": {"type": "NLLLoss"}, "seed": 0, "threads": 2}
        return self.run_job("evaluate", spec)

    def assert_error(self, lines, rc, pattern, hint=True):
        self.assertEqual(rc, 1, lines)
        self.assertEqual(len(lines), 1, lines)
        e = lines[0]
        self.assertEqual(e["event"], "error")
        self.assertRegex(e["message"], pattern)
        if hint:
            self.assertTrue(e["hint"], e)
        return e

    def test_fit_then_evaluate(self):
        rc, lines, err = self.run_job("train", self.fit_spec(
            validate=loader(False, batch=500)))
        self.assertEqual(rc, 0, err)
        start, first, done = lines[0], lines[1], lines[-1]
        self.assertEqual(start, {"event": "start", "epochs": 1, "steps_per_epoch": 938,
                                 "samples": 4000, "params": 784 * 64 + 64 + 64 * 10 + 10, "ranks": 1,
                                 "engine": start["engine"], "total_steps": 63, "val_samples": 10000, "accumulate": 1})
        # a GPU where there is one, as a rank would (docs/cuda.md), else the CPU core
        cpu = r"CPU, 2 threads, (avx512|avx2|generic) kernels \(OpenBLAS \w+\)"
        self.assertRegex(start["engine"], r"^(%s|cuda:0, .+)$" % cpu if taastest.gpus() else r"^%s$" % cpu)
        self.assertEqual((first["event"], first["epoch"], first["step"]), ("step", 1, 1))
        self.assertGreater(first["loss"], 2.0)  # about ln(10) before any step
        epochs = [l for l in lines if l["event"] == "epoch"]
        self.assertEqual(len(epochs), 1)
        self.assertLess(epochs[0]["train_loss"], first["loss"] - 0.5)
        self.assertLess(epochs[0]["val_loss"], 1.2)
        self.assertGreater(epochs[0]["val_accuracy"], 0.55)
        self.assertEqual(done["event"], "done")
        self.assertEqual(done["steps"], 63)  # ceil(4000 / 64)
        self.assertEqual(done["history"], epochs)
        self.assertIs(done["interrupted"], False)
        self.assertEqual([c["samples"] for c in done["checksums"]], [4000])
        self.assertRegex(done["checksums"][0]["checksum"], r"^0x[0-9a-f]{16}$")
        header, data = read_safetensors(done["weights"])
        self.assertEqual(header["__metadata__"], {"format": "pt"})
        self.assertNotIn("0.weight", header)  # Flatten has no parameters
        self.assertEqual(header["1.weight"]["shape"], [64, 784])
        self.assertEqual(header["3.bias"]["shape"], [10])
        self.assertEqual(len(data), 4 * start["params"])

        rc, lines, err = self.evaluate(done["weights"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(lines), 1, lines)
        ev = lines[0]
        self.assertEqual((ev["event"], ev["samples"]), ("done", 2000))
        self.assertGreater(ev["accuracy"], 0.55)  # chance is 0.1
        self.assertLess(ev["loss"], 1.2)

        # the same weights as a starting point: evaluate is not fooled by a fresh init
        rc, lines, _ = self.run_job("train", self.fit_spec(weights=done["weights"], units=64,
                                                           optimizer={"type": "SGD", "lr": 0.0}))
        self.assertEqual(rc, 0)
        self.assertLess(lines[1]["loss"], 1.2)

    def test_kernel_set_from_taas_cpu(self):
        """TAAS_CPU lowers the kernel set (and OpenBLAS's core with it); the engine's name says
        which runs; a name that is no set is the job's error, before anything trains."""
        spec = self.fit_spec(units=640)
        rc, lines, err = self.run_job("train", spec, env={"TAAS_CPU": "generic"})
        self.assertEqual(rc, 0, err)
        self.assertRegex(lines[0]["engine"], r"^CPU, 2 threads, generic kernels \(OpenBLAS \w+\)$")
        with open("/proc/cpuinfo") as f:
            flags = f.read().split()
        if "avx2" in flags and "fma" in flags:
            rc, lines, err = self.run_job("train", spec, env={"TAAS_CPU": "avx2"})
            self.assertEqual(rc, 0, err)
            self.assertEqual(lines[0]["engine"], "CPU, 2 threads, avx2 kernels (OpenBLAS Haswell)")
        rc, lines, err = self.run_job("train", spec, env={"TAAS_CPU": "sse9"})
        e = self.assert_error(lines, rc, r"^TAAS_CPU=sse9 names no kernel set$")
        self.assertIn("avx512, avx2 or generic", e["hint"])

    def test_the_same_bytes_whatever_the_environment(self):
        """The spec's "kernels" is the set the job runs, and the trained bytes depend on the
        spec alone: OpenBLAS's variables (a core no set uses, an L2 size, its own threads) and
        OpenMP's (a team that may come smaller than the spec's threads) change nothing."""
        spec = self.fit_spec(model=CNN, units=640, optimizer={"type": "Adam", "lr": 0.002})
        plain = {k: v for k, v in os.environ.items() if not k.startswith(("OPENBLAS_", "OMP_", "GOMP_", "TAAS_CPU"))}
        hostile = dict(OPENBLAS_CORETYPE="Prescott", OPENBLAS_L2_SIZE="512", OPENBLAS_NUM_THREADS="4",
                       OMP_NUM_THREADS="7", OMP_DYNAMIC="true", OMP_THREAD_LIMIT="1")
        runs = {}
        for kernels in sorted({taastest.best_kernels(), "generic"}):
            spec["kernels"] = kernels
            for name, env in (("plain", {}), ("hostile", hostile)):
                rc, lines, err = self.run_job("train", spec, env=dict(plain, **env), clean=True)
                self.assertEqual(rc, 0, err)
                self.assertRegex(lines[0]["engine"], r"^CPU, 2 threads, %s kernels \(OpenBLAS %s\)$"
                                 % (kernels, {"avx512": "SkylakeX", "avx2": "Haswell", "generic": "Nehalem"}[kernels]))
                with open(lines[-1]["weights"], "rb") as f:
                    runs[kernels, name] = f.read()
            self.assertEqual(runs[kernels, "plain"], runs[kernels, "hostile"], kernels)
        spec["kernels"] = "sse9"
        rc, lines, err = self.run_job("train", spec)
        self.assert_error(lines, rc, r'^the job spec\'s "kernels" must be "avx512", "avx2" or "generic"$')

    def test_epochs_history_and_scheduler(self):
        # two epochs over the 10000 test images with Adadelta and StepLR
        rc, lines, err = self.run_job("train", self.fit_spec(
            train=loader(False, batch=100, shuffle=True), units=0, epochs=2,
            optimizer={"type": "Adadelta"},
            scheduler={"type": "StepLR", "step_size": 1, "gamma": 0.5}))
        self.assertEqual(rc, 0, err)
        done = lines[-1]
        self.assertEqual(done["steps"], 200)
        h = done["history"]
        self.assertEqual([e["epoch"] for e in h], [1, 2])
        self.assertLess(h[1]["train_loss"], h[0]["train_loss"])
        self.assertIsNone(h[0]["val_loss"])
        steps = [l for l in lines if l["event"] == "step"]
        self.assertLessEqual(len(steps), 5 * (h[0]["time_s"] + h[1]["time_s"]) + 2)

    def test_warmup_then_cosine_per_step(self):
        # nanoGPT's schedule with PyTorch's names, stepped after every optimizer step: each
        # epoch line's lr is that of its last step, as torch 1.13 computes the sequence
        import torch
        import warnings
        S = torch.optim.lr_scheduler
        p = torch.zeros(1, requires_grad=True)
        opt = torch.optim.AdamW([p], lr=0.01)
        s = S.SequentialLR(opt, [S.LinearLR(opt, 0.1, 1.0, 3), S.CosineAnnealingLR(opt, 7, 0.001)], [3])
        lrs = []
        with warnings.catch_warnings():  # SequentialLR's own step(0) is deprecated in 1.13
            warnings.simplefilter("ignore")
            for _ in range(12):
                lrs.append(s.get_last_lr()[0])
                opt.step()
                s.step()
        sched = {"type": "SequentialLR", "milestones": [3], "schedulers": [
            {"type": "LinearLR", "start_factor": 0.1, "end_factor": 1.0, "total_iters": 3},
            {"type": "CosineAnnealingLR", "T_max": 7, "eta_min": 0.001}]}
        # 4 steps an epoch: 256 images in batches of 64
        import numpy as np
        rng = np.random.default_rng(0)
        np.save(self.path("x.npy"), rng.integers(0, 256, (256, 28, 28), dtype=np.uint8))
        np.save(self.path("y.npy"), rng.integers(0, 10, 256, dtype=np.int64))
        small = {"type": "DataLoader", "batch_size": 64, "shuffle": True,
                 "dataset": {"type": "NpyDataset", "images": self.path("x.npy"), "labels": self.path("y.npy"),
                             "transform": {"type": "ToTensor"}}}
        rc, lines, err = self.run_job("train", self.fit_spec(
            train=small, units=0, epochs=3,
            optimizer={"type": "AdamW", "lr": 0.01}, scheduler=sched, scheduler_interval="step"))
        self.assertEqual(rc, 0, err)
        h = lines[-1]["history"]
        self.assertEqual([e["steps"] for e in h], [4, 4, 4], h)
        for e in h:
            self.assertAlmostEqual(e["lr"], lrs[4 * e["epoch"] - 1], delta=1e-15 * lrs[4 * e["epoch"] - 1])
        # per epoch (the default for SequentialLR), the same schedule moves once an epoch
        rc, lines, err = self.run_job("train", self.fit_spec(
            train=small, units=0, epochs=3, optimizer={"type": "AdamW", "lr": 0.01}, scheduler=sched))
        self.assertEqual(rc, 0, err)
        self.assertEqual([e["lr"] for e in lines[-1]["history"]], lrs[:3])
        rc, lines, err = self.run_job("train", self.fit_spec(scheduler=sched, scheduler_interval="batch"))
        self.assert_error(lines, rc, r"scheduler_interval is 'batch'")

    def small_loader(self, n, batch, shuffle=True):
        import numpy as np
        rng = np.random.default_rng(0)
        np.save(self.path("x.npy"), rng.integers(0, 256, (n, 28, 28), dtype=np.uint8))
        np.save(self.path("y.npy"), rng.integers(0, 10, n, dtype=np.int64))
        return {"type": "DataLoader", "batch_size": batch, "shuffle": shuffle,
                "dataset": {"type": "NpyDataset", "images": self.path("x.npy"), "labels": self.path("y.npy"),
                            "transform": {"type": "ToTensor"}}}

    def weights(self, path):
        import numpy as np
        header, data = read_safetensors(path)
        return {k: np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]], dtype=np.float32)
                for k, v in header.items() if k != "__metadata__"}

    def test_accumulate_is_a_bigger_batch(self):
        # two batches of 32 a step are one batch of 64, the short last one (250 = 3 x 64 + 58)
        # included: the same weights after two epochs, to float rounding
        import numpy as np
        got = {}
        for batch, acc in ((64, 1), (32, 2)):
            rc, lines, err = self.run_job("train", self.fit_spec(
                train=self.small_loader(250, batch), units=0, epochs=2, accumulate=acc,
                optimizer={"type": "SGD", "lr": 0.1, "momentum": 0.9},
                out=self.path("w%d.safetensors" % acc)))
            self.assertEqual(rc, 0, err)
            self.assertEqual(lines[-1]["steps"], 8, lines[-1])  # optimizer steps
            self.assertEqual([e["steps"] for e in lines[-1]["history"]], [4 * acc, 4 * acc])
            got[acc] = self.weights(self.path("w%d.safetensors" % acc))
        moved = 0
        for k in got[1]:
            np.testing.assert_allclose(got[2][k], got[1][k], rtol=1e-4, atol=1e-6, err_msg=k)
            moved += np.abs(got[1][k]).sum()
        self.assertGreater(moved, 0)
        # three a step: the epoch's 8 batches make steps of 3, 3 and 2
        rc, lines, err = self.run_job("train", self.fit_spec(
            train=self.small_loader(250, 32), units=0, epochs=2, accumulate=3))
        self.assertEqual(rc, 0, err)
        self.assertEqual(lines[-1]["steps"], 6)

    def test_precision(self):
        # bf16 is a GPU's arithmetic: a CPU rank says so and trains in FP32, the same weights
        rc, lines, err = self.run_job("train", self.fit_spec(precision="bf16", out=self.path("b.safetensors")))
        self.assertEqual(rc, 0, err)
        logs = [l["text"] for l in lines if l["event"] == "log"]
        if not lines[0].get("engine", "").startswith("cuda"):
            self.assertIn("precision='bf16' is for GPUs: this rank computes in FP32 on the CPU", logs)
            rc, lines, err = self.run_job("train", self.fit_spec(precision="fp32", out=self.path("f.safetensors")))
            self.assertEqual(rc, 0, err)
            self.assertEqual(self.weights(self.path("b.safetensors"))["1.weight"].tobytes(),
                             self.weights(self.path("f.safetensors"))["1.weight"].tobytes())
        rc, lines, err = self.run_job("train", self.fit_spec(precision="fp16"))
        self.assert_error(lines, rc, r"precision is 'fp16'")

    def test_sigint_keeps_the_last_step(self):
        spec = self.fit_spec(units=0, epochs=20)
        p = self.path("long.json")
        with open(p, "w") as f:
            json.dump(spec, f)
        proc = subprocess.Popen([worker(), "train", "--spec", p], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            self.assertEqual(json.loads(proc.stdout.readline())["event"], "start")
            self.assertEqual(json.loads(proc.stdout.readline())["event"], "step")
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.assertEqual(proc.returncode, 0, err)
        done = json.loads(out.splitlines()[-1])
        self.assertEqual(done["event"], "done")
        self.assertIs(done["interrupted"], True)
        self.assertGreater(done["steps"], 0)
        self.assertLess(done["steps"], 20 * 938)
        rc, lines, err = self.evaluate(done["weights"], units=500)
        self.assertEqual(rc, 0, err)
        self.assertEqual(lines[0]["samples"], 500)

    def test_ignore_index(self):
        """NLLLoss(ignore_index=k) trains, and evaluates over the samples of the other classes
        only: over one batch, leaving out each class in turn counts every sample's loss and
        hit nine times."""
        rc, lines, err = self.run_job("train", self.fit_spec(units=640, loss={"type": "NLLLoss", "ignore_index": 0}))
        self.assertEqual(rc, 0, err)
        weights = lines[-1]["weights"]
        n = 250
        with gzip.open(os.path.join(FMNIST, "t10k-labels-idx1-ubyte.gz")) as f:
            labels = list(f.read()[8:8 + n])

        def evaluate(loss):
            rc, lines, err = self.run_job("evaluate", {
                "version": 1, "job": "evaluate", "model": MLP, "weights": weights,
                "validate": loader(False, batch=n), "units": n, "loss": loss, "seed": 0, "threads": 2})
            self.assertEqual(rc, 0, err)
            self.assertEqual(lines[0]["samples"], n)
            return lines[0]["loss"], lines[0]["accuracy"]

        loss, acc = evaluate({"type": "NLLLoss"})
        loss_sum = acc_sum = 0.0
        for k in range(10):
            counted = n - labels.count(k)
            self.assertLess(counted, n)
            lk, ak = evaluate({"type": "NLLLoss", "ignore_index": k})
            loss_sum += lk * counted
            acc_sum += ak * counted
        self.assertAlmostEqual(loss_sum / (9 * n), loss, delta=1e-4 * loss)
        self.assertAlmostEqual(acc_sum / (9 * n), acc, delta=1e-6)

    def test_nan_loss_names_its_step(self):
        rc, lines, _ = self.run_job("train", self.fit_spec(optimizer={"type": "SGD", "lr": 1e30}))
        self.assertEqual(rc, 1)
        e = lines[-1]
        self.assertEqual((e["event"], e["ename"]), ("error", "TaasValueError"))
        m = re.fullmatch(r"the loss is (nan|inf) at epoch 1 step (\d+)", e["message"])
        self.assertTrue(m, e["message"])
        self.assertGreater(int(m.group(2)), 1)
        self.assertEqual(e["step"], int(m.group(2)))
        self.assertIn("learning rate", e["hint"])
        self.assertFalse(os.path.exists(self.path("w.safetensors")))

    def checkpoint(self, **change):
        """A checkpoint of fit_spec()'s fit at step 60 of its 63 (units 4000: 3,840 samples
        done), as a rank writes it: the weights of a short run (SGD without momentum keeps
        no optimizer state) with the record in the metadata, changed by change."""
        rc, lines, err = self.run_job("train", self.fit_spec(units=64, out=self.path("w0.safetensors")))
        self.assertEqual(rc, 0, err)
        header, data = read_safetensors(self.path("w0.safetensors"))
        record = {"version": 1, "epoch": 0, "step": 60, "steps": 60, "world": 1, "kernels": "generic",
                  "seed": 1, "epochs": 1, "units": 4000, "batch_size": 64, "steps_per_epoch": 938,
                  "optimizer": "SGD", "lr": 0.1, "momentum": 0.0, "beta1": 0.9, "scheduler": None,
                  "epoch_loss_sum": 3840 * 0.9, "epoch_samples": 3840, "epoch_checksum": "0x0123456789abcdef",
                  "history": [], "checksums": []}
        record.update(change)
        header["__metadata__"] = {"format": "pt", "taas.checkpoint": json.dumps(record)}
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        path = self.path("c.safetensors")
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text + data)
        return path

    def test_a_resumed_epoch_counts_its_own_samples(self):
        """Samples/s of a resumed epoch: the samples this run trained in this run's time, not
        the whole epoch's in it (issue 27: 444,148/s); none when the units were already
        reached (161,185,260,927/s)."""
        path = self.checkpoint()
        rc, lines, err = self.run_job("train", self.fit_spec(weights=path, resume=True))
        self.assertEqual(rc, 0, err)
        epoch = [l for l in lines if l["event"] == "epoch"]
        self.assertEqual(len(epoch), 1, lines)
        self.assertGreater(epoch[0]["time_s"], 0)
        # steps 61 to 63 of this run: 4,000 - 3,840 samples
        self.assertAlmostEqual(epoch[0]["samples_per_s"] * epoch[0]["time_s"], 160, places=6)
        rc, lines, err = self.run_job("train", self.fit_spec(weights=path, resume=True, units=3840))
        self.assertEqual(rc, 0, err)
        epoch = [l for l in lines if l["event"] == "epoch"]
        self.assertEqual(len(epoch), 1, lines)
        self.assertEqual(epoch[0]["samples_per_s"], 0)
        self.assertEqual(lines[-1]["steps"], 60)

    def test_a_checkpoint_record_is_checked_by_field(self):
        """A record's field of the wrong type or range is refused by name, with the file's
        name, where "lr": "fast" trained at lr 0 and "epoch": 10**18 ended at once."""
        for change, want in [({"lr": "fast"}, r'"lr" is "fast"; it must be a number >= 0'),
                             ({"epoch": 10 ** 18}, r'"epoch" is 1000000000000000000; it must be a whole number '
                                                   r'from 0 to 0'),
                             ({"step": -1}, r'"step" is -1'),
                             ({"step": 2 ** 62}, r'"step" is 4611686018427387904'),
                             ({"epoch_checksum": "0x12"}, r'"epoch_checksum" is "0x12"'),
                             ({"history": "junk"}, r'"history" is "junk"'),
                             ({"world": 2}, r"the checkpoint was made with ranks \(--gpus\) 2; this fit has 1")]:
            path = self.checkpoint(**change)
            rc, lines, _ = self.run_job("train", self.fit_spec(weights=path, resume=True))
            e = self.assert_error(lines, rc, "^%s: .*%s" % (re.escape(path), want))
            self.assertEqual(e["ename"], "TaasValueError")
            self.assertNotIn("version", e["hint"])

    def test_bad_specs(self):
        rc, lines, _ = self.run_job("train", self.fit_spec(optimizer=None))
        self.assert_error(lines, rc, r'"optimizer" is not an object')
        rc, lines, _ = self.run_job("train", self.fit_spec(optimizer={"type": "SGD", "lr": -1}))
        self.assert_error(lines, rc, r"SGD: invalid learning rate -1")
        rc, lines, _ = self.run_job("train", self.fit_spec(version=2))
        self.assert_error(lines, rc, r'"version" must be 1')
        rc, lines, _ = self.run_job("train", self.fit_spec(job="evaluate"))
        self.assert_error(lines, rc, r'runs "job": "fit", not "evaluate"')
        rc, lines, _ = self.run_job("train", self.fit_spec(out=None))
        self.assert_error(lines, rc, r'no "out" path')
        rc, lines, _ = self.run_job("train", self.fit_spec(epochs=0))
        self.assert_error(lines, rc, r'"epochs" must be an integer from 1')
        rc, lines, _ = self.run_job("train", self.fit_spec(loss={"type": "MSELoss"}))
        self.assert_error(lines, rc, r"MSELoss cannot train on class labels")
        rc, lines, _ = self.run_job("train", self.fit_spec(loss={"type": "NLLLoss", "ignore_index": 0.5}))
        self.assert_error(lines, rc, r'^NLLLoss: "ignore_index" must be an integer$')
        rc, lines, _ = self.run_job("train", self.fit_spec(train={"type": "FashionMNIST"}))
        self.assert_error(lines, rc, r'"train" is not a DataLoader spec')
        rc, lines, _ = self.run_job("train", self.fit_spec(scheduler={"type": "CyclicLR"}))
        self.assert_error(lines, rc, r"unknown scheduler 'CyclicLR'")
        # a model whose shapes do not fit the data: taas_model_new's error
        bad = json.loads(json.dumps(MLP))
        bad["layers"][1]["in_features"] = 100
        rc, lines, _ = self.run_job("train", self.fit_spec(model=bad))
        self.assert_error(lines, rc, r"784|100")
        # unreadable weights
        rc, lines, _ = self.evaluate(self.path("missing.safetensors"))
        self.assert_error(lines, rc, re.escape("missing.safetensors"), hint=False)
        with open(self.path("junk.safetensors"), "wb") as f:
            f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{}")
        rc, lines, _ = self.evaluate(self.path("junk.safetensors"))
        self.assert_error(lines, rc, re.escape("junk.safetensors"), hint=False)
        rc, lines, _ = self.run_job("evaluate", {"version": 1, "job": "evaluate", "model": MLP,
                                                 "weights": None, "validate": loader(False),
                                                 "loss": {"type": "NLLLoss"}})
        self.assert_error(lines, rc, r'no "weights" path')
        # not JSON at all
        p = self.path("broken.json")
        with open(p, "w") as f:
            f.write("{not json")
        r = subprocess.run([worker(), "train", "--spec", p], capture_output=True, text=True)
        e = self.assert_error([json.loads(l) for l in r.stdout.splitlines()], r.returncode,
                              r"cannot read the job spec .*broken\.json")
        self.assertIsNone(e["step"])


if __name__ == "__main__":
    unittest.main()
