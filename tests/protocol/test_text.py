"""A language model on text through a real kernel (issue 29): a small GPT2LMHeadModel trains on
Debian's fortunes as TextFile windows (a character-level model, the vocabulary the bytes),
its loss falls from ln 256 towards the text's entropy, evaluate() scores held-out text per
token, and save() writes Hugging Face's keys; a model whose vocabulary or block size does not
fit the text is refused before anything runs, and a text shorter than one window is the
job's error naming the file."""

import math
import os
import re
import struct
import json
import unittest

import taastest

FORTUNES = "/usr/share/games/fortunes/fortunes"

GPT = ("transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=256, n_positions=64, n_embd=64, "
       "n_layer=2, n_head=4, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))")

SETUP = """\
net = %s
train = DataLoader(TextFile('%s', block_size=32, split='train'), batch_size=16, shuffle=True, drop_last=True)
val = DataLoader(TextFile('%s', block_size=32, split='val'), batch_size=16)
""" % (GPT, FORTUNES, FORTUNES)


def mean_abs(path, key):
    """The mean magnitude of tensor key (float32) of a safetensors file."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        begin, end = header[key]["data_offsets"]
        f.seek(8 + n + begin)
        vals = struct.unpack("<%df" % ((end - begin) // 4), f.read(end - begin))
    return sum(abs(v) for v in vals) / len(vals)


def kernel_env(cwd):
    """The job folders' TMPDIR, and a Hugging Face cache of the test's own."""
    env = taastest.job_tmp(cwd)
    env["HF_HUB_CACHE"] = os.path.join(cwd, "hub")
    return env


# config.json as Hugging Face writes GPT-2's, at the test model's sizes
HF_CONFIG = {
    "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
    "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 64, "n_embd": 64, "n_head": 4, "n_layer": 2,
    "n_positions": 64, "resid_pdrop": 0.1, "summary_activation": None, "summary_first_dropout": 0.1,
    "summary_proj_to_labels": True, "summary_type": "cls_index", "summary_use_proj": True,
    "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}}, "vocab_size": 256,
}


@unittest.skipUnless(os.path.isfile(FORTUNES), "Debian's fortunes is not installed")
class TextInTheNotebook(taastest.KernelCase):
    tmp_prefix = "taas-text-"
    kernel_env = staticmethod(kernel_env)
    setup_code = SETUP

    def test_1_train_evaluate_save(self):
        size = os.path.getsize(FORTUNES)
        text = self.result("train.dataset")["text/plain"]
        self.assertIn("Dataset TextFile", text)
        self.assertIn("Block size: 32 (windows of 33 bytes, a vocabulary of 256)", text)
        self.assertIn("Number of datapoints: %d" % ((int(size * 0.9) - 1) // 32), text)
        msgs = self.ok("h = fit(net, train, epochs=3, optimizer=AdamW(lr=3e-3), loss=CrossEntropyLoss(), "
                       "validate=val)\nh", timeout=300)
        h = taastest.text(taastest.only(msgs, "execute_result")[0]["content"]["data"]["text/plain"])
        # after each validation the display shows text from the model, as nanoGPT prints it
        view = taastest.last_display(msgs)
        sample = view["text/plain"].split("\nsample after epoch 3:\n", 1)[1].split("\ndone after", 1)[0]
        self.assertGreaterEqual(len(sample), 150, view["text/plain"])
        self.assertGreater(sum(c.isalpha() or c == " " for c in sample), 0.6 * len(sample), sample)
        self.assertIn("<div class=\"taas-sample\">sample after epoch 3:<pre>", view["text/html"])
        # a language model's History: perplexity, and tokens rather than samples a second
        self.assertRegex(h, r"epoch +train loss +val loss +val perplexity +val accuracy +time +tokens/s\n")
        rows = re.findall(r"^ +(\d+) +([0-9.]+) +([0-9.]+) +([0-9.]+) ", h, re.M)
        self.assertEqual([int(r[0]) for r in rows], [1, 2, 3], h)
        for r in rows:  # perplexity = exp(val loss)
            self.assertAlmostEqual(float(r[3]), math.exp(float(r[2])), delta=0.01 * float(r[3]))
        train_loss = [float(r[1]) for r in rows]
        # from the uniform guess's ln 256 = 5.55 towards what a model of the bytes learns
        self.assertLess(train_loss[-1], 3.2, h)
        self.assertLess(train_loss[-1], train_loss[0], h)
        ev = self.result("evaluate(net, val)", timeout=120)["text/plain"]
        m = re.fullmatch(r"Evaluation\(loss=([0-9.]+), accuracy=([0-9.]+), samples=(\d+)\)", ev)
        self.assertIsNotNone(m, ev)
        loss, acc, n = float(m.group(1)), float(m.group(2)), int(m.group(3))
        self.assertLess(loss, 3.4)
        self.assertGreater(acc, 0.2)  # a byte's next byte, per token
        self.assertEqual(n, (size - int(size * 0.9) - 1) // 32)
        path = os.path.join(self.tmp.name, "gpt.safetensors")
        self.ok("save(net, '%s')" % path)
        with open(path, "rb") as f:
            header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
        self.assertEqual(header["transformer.wte.weight"]["shape"], [256, 64])
        self.assertEqual(header["transformer.h.1.attn.c_attn.weight"]["shape"], [64, 192])
        self.assertEqual(header["lm_head.weight"]["shape"], [256, 64])

    def test_2_refused_before_it_runs(self):
        small = GPT.replace("vocab_size=256", "vocab_size=100")
        err = self.error("fit(%s, train, epochs=1, optimizer=AdamW(), loss=CrossEntropyLoss())" % small, timeout=60)
        self.assertIn("the model predicts 100 tokens, but TextFile has a vocabulary of 256", err["evalue"])
        err = self.error("fit(%s, DataLoader(TextFile('%s', block_size=100), batch_size=4), epochs=1, "
                         "optimizer=AdamW(), loss=CrossEntropyLoss())" % (GPT, FORTUNES), timeout=60)
        self.assertIn("n_positions = 64", err["evalue"])

    def test_4_clip_and_param_groups(self):
        """clip_grad_norm reaches the update: SGD clipped to a norm of 1e-6 hardly moves the
        model, so its loss stays at the uniform guess's; param_groups='nanogpt' spares the
        embeddings the weight decay that shrinks them in one group."""
        fresh = "transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=256, n_positions=64, n_embd=32, " \
                "n_layer=1, n_head=2, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))"
        h = self.result("fit(%s, train, epochs=1, units=320, optimizer=SGD(lr=0.5), loss=CrossEntropyLoss(), "
                        "clip_grad_norm=1e-6)" % fresh, timeout=120)["text/plain"]
        loss = float(re.findall(r"^ +1 +([0-9.]+)", h, re.M)[0])
        self.assertGreater(loss, 5.4, h)  # ln 256 = 5.55: nothing learnt
        norms = {}
        for groups in ("None", "'nanogpt'"):
            path = os.path.join(self.tmp.name, "g%d.safetensors" % len(norms))
            self.ok("g = %s\nfit(g, train, epochs=1, units=320, optimizer=AdamW(lr=0.02, weight_decay=50.0, "
                    "param_groups=%s), loss=CrossEntropyLoss())\nsave(g, '%s')" % (fresh, groups, path), timeout=120)
            norms[groups] = mean_abs(path, "transformer.wte.weight")
        # decoupled decay p *= 1 - lr * weight_decay = 0 leaves a decayed table one Adam step
        # (about lr) from zero; the spared one walks on by about lr a step
        self.assertLess(norms["None"], 0.35 * norms["'nanogpt'"], norms)

    def test_5_from_pretrained(self):
        """GPT2LMHeadModel.from_pretrained finds a model in Hugging Face's cache by its hub name
        (refs/main's snapshot) or in a folder, with the trained weights (evaluate() scores it as
        the model test_1 trained), and it fine-tunes; a model not at hand and a config.json of
        another model are clear errors, and nothing is downloaded."""
        repo = os.path.join(self.tmp.name, "hub", "models--taas-test--tiny")
        snap = os.path.join(repo, "snapshots", "0123abcd")
        os.makedirs(snap)
        os.makedirs(os.path.join(repo, "refs"))
        with open(os.path.join(repo, "refs", "main"), "w") as f:
            f.write("0123abcd\n")
        with open(os.path.join(snap, "config.json"), "w") as f:
            json.dump(HF_CONFIG, f)
        self.ok("save(net, '%s')" % os.path.join(snap, "model.safetensors"))
        want = self.result("evaluate(net, val)", timeout=120)["text/plain"]
        got = self.result("ft = transformers.GPT2LMHeadModel.from_pretrained('taas-test/tiny')\nevaluate(ft, val)",
                          timeout=120)["text/plain"]
        self.assertEqual(got, want)
        self.assertIn("GPT2Block", self.result("ft")["text/plain"])
        msgs = self.ok("fit(ft, train, max_steps=3, optimizer=AdamW(lr=1e-4), loss=CrossEntropyLoss())", timeout=120)
        self.assertRegex(taastest.last_display(msgs)["text/plain"], r"done after [0-9.]+ s: 1 epoch, 3 steps")
        self.ok("GPT2LMHeadModel.from_pretrained('%s')" % snap, timeout=60)
        err = self.error("transformers.GPT2LMHeadModel.from_pretrained('taas-test/absent')", "TaasIOError")
        self.assertIn("no GPT-2 'taas-test/absent' at hand", err["evalue"])
        self.assertIn(os.path.join(self.tmp.name, "hub"), err["evalue"])
        self.assertIn("downloads nothing", err["evalue"])
        for change, words in (({"model_type": "bert"}, "is the config of a bert model, not of GPT-2"),
                              ({"rotary_dim": 64}, "has \"rotary_dim\", which taas's GPT2Config does not take"),
                              ({"n_head": 5}, "n_embd (64) must be a multiple of n_head (5)")):
            bad = os.path.join(self.tmp.name, "bad%d" % len(words))
            os.makedirs(bad)
            with open(os.path.join(bad, "config.json"), "w") as f:
                json.dump(dict(HF_CONFIG, **change), f)
            os.link(os.path.join(snap, "model.safetensors"), os.path.join(bad, "model.safetensors"))
            err = self.error("GPT2LMHeadModel.from_pretrained('%s')" % bad)
            self.assertIn(words, err["evalue"])
            self.assertIn(os.path.join(bad, "config.json"), err["evalue"])

    def test_2a_generate(self):
        """generate() on the model test_1 trained: text after the prompt, the same for a seed and
        another for another seed, greedy with top_k=1 whatever the seed; a prompt of the wrong
        kind, and a model without weights, are refused; the stop button ends a long one."""
        text = lambda code: taastest.text(self.result(code, timeout=120)["text/plain"])  # noqa: E731
        a = text("generate(net, 'The ', max_new_tokens=60, seed=3)")
        self.assertRegex(a, r"^['\"](.|\n){20,}['\"]$")  # a str's repr, 60 bytes of text
        self.assertEqual(text("generate(net, 'The ', max_new_tokens=60, seed=3)"), a)
        self.assertNotEqual(text("generate(net, 'The ', max_new_tokens=60, seed=4)"), a)
        self.assertEqual(text("generate(net, 'The ', max_new_tokens=30, top_k=1, seed=1)"),
                         text("generate(net, 'The ', max_new_tokens=30, top_k=1, seed=2)"))
        err = self.error("generate(net, [65, 66])", "TaasTypeError")
        self.assertIn("prompt must be a str for this model (a vocabulary of 256)", err["evalue"])
        self.error("generate(%s, 'x')" % GPT)
        msg_id = self.k.send("shell", "execute_request",
                             {"code": "g = generate(net, 'x', max_new_tokens=1000000)", "silent": False,
                              "store_history": True, "user_expressions": {}, "allow_stdin": False,
                              "stop_on_error": True})
        self.assertTrue(taastest.wait_until(lambda: taastest.worker_pids(self.k.pid), 30))
        self.k.request("control", "interrupt_request")
        reply = self.k.reply(msg_id, timeout=30)
        self.assertEqual(reply["content"]["ename"], "KeyboardInterrupt")
        self.assertTrue(taastest.wait_until(lambda: not taastest.worker_pids(self.k.pid), 30))
        self.error("g", "TaasNameError")

    def test_5_token_shards(self):
        """llm.c's token shards (the fortunes' bytes as uint16 tokens, in two shards named by a
        brace range) train the same model; a token beyond the model's vocabulary is the job's
        error when its batch reaches the rank, naming the token and its place."""
        with open(FORTUNES, "rb") as f:
            data = f.read()
        half = len(data) // 2
        for i, part in enumerate((data[:half], data[half:])):
            with open(os.path.join(self.tmp.name, "shard_%03d.bin" % i), "wb") as f:
                f.write(struct.pack("<3i", 20240520, 1, len(part)) + b"\0" * (1024 - 12))
                f.write(b"".join(struct.pack("<H", b) for b in part))
        urls = os.path.join(self.tmp.name, "shard_{000..001}.bin")
        text = self.result("shards = DataLoader(TokenShards('%s', block_size=32), batch_size=16, shuffle=True)\n"
                           "shards" % urls)["text/plain"]
        self.assertIn("Dataset TokenShards", text)
        self.assertIn("Number of datapoints: %d" % ((half - 1) // 32 + (len(data) - half - 1) // 32), text)
        h = self.result("fit(%s, shards, epochs=2, optimizer=AdamW(lr=3e-3), loss=CrossEntropyLoss())" % GPT,
                        timeout=300)["text/plain"]
        losses = [float(r) for r in re.findall(r"^ +\d+ +([0-9.]+) ", h, re.M)]
        self.assertEqual(len(losses), 2, h)
        self.assertLess(losses[-1], 3.2, h)
        with open(os.path.join(self.tmp.name, "big.bin"), "wb") as f:
            f.write(struct.pack("<3i", 20240520, 1, 100) + b"\0" * (1024 - 12))
            f.write(b"".join(struct.pack("<H", 300 if i == 50 else 65) for i in range(100)))
        err = self.error("fit(%s, DataLoader(TokenShards('%s', block_size=32), batch_size=4), epochs=1, "
                         "optimizer=AdamW(), loss=CrossEntropyLoss())" % (GPT, os.path.join(self.tmp.name, "big.bin")),
                         timeout=120)
        self.assertIn("token 300 at position", err["evalue"])
        self.assertIn("outside the model's vocabulary [0, 256)", err["evalue"])

    def test_4a_max_steps(self):
        """max_steps counts optimizer steps across epochs: 50 steps of 43 an epoch are two epochs,
        the second cut at its 7th step."""
        fresh = "transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=256, n_positions=64, n_embd=32, " \
                "n_layer=1, n_head=2, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))"
        size = os.path.getsize(FORTUNES)
        per_epoch = ((int(size * 0.9) - 1) // 32) // 16  # drop_last batches of 16 windows
        self.assertEqual(per_epoch, 43)
        msgs = self.ok("hs = fit(%s, train, max_steps=50, optimizer=AdamW(lr=1e-3), loss=CrossEntropyLoss())\nhs"
                       % fresh, timeout=120)
        view = taastest.last_display(msgs)["text/plain"]
        self.assertRegex(view, r"done after [0-9.]+ s: 2 epochs, 50 steps")
        h = taastest.text(taastest.only(msgs, "execute_result")[0]["content"]["data"]["text/plain"])
        self.assertTrue(h.startswith("History (2 epochs)"), h)

    def test_4c_recipe(self):
        """The language models' recipe from a cell: two batches a step (43 batches an epoch are 22
        steps), warmup then cosine stepped per optimizer step, counted in steps."""
        fresh = "transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=256, n_positions=64, n_embd=32, " \
                "n_layer=1, n_head=2))"
        msgs = self.ok("s = SequentialLR(schedulers=[LinearLR(start_factor=0.1, total_iters=5), "
                       "CosineAnnealingLR(T_max=25, eta_min=1e-5)], milestones=[5])\n"
                       "fit(%s, train, max_steps=30, accumulate=2, optimizer=AdamW(lr=1e-3, param_groups='nanogpt'), "
                       "scheduler=s, scheduler_interval='step', clip_grad_norm=1.0, loss=CrossEntropyLoss())"
                       % fresh, timeout=120)
        view = taastest.last_display(msgs)["text/plain"]
        self.assertRegex(view, r"done after [0-9.]+ s: 2 epochs, 59 batches in 30 optimizer steps")
        err = self.error("fit(%s, train, accumulate=0, optimizer=AdamW(), loss=CrossEntropyLoss())" % fresh)
        self.assertIn("accumulate", err["evalue"])
        err = self.error("fit(%s, train, scheduler_interval='batch', optimizer=AdamW(), loss=CrossEntropyLoss())"
                         % fresh)
        self.assertIn("'epoch' or 'step'", err["evalue"])

    def test_4b_show(self):
        """show() of a TextFile lists its windows as text, one a line, and draws them as strips."""
        msgs = self.ok("show(TextFile('%s', block_size=32), n=2)" % FORTUNES, timeout=60)
        data = taastest.only(msgs, "display_data")[0]["content"]["data"]
        with open(FORTUNES, "rb") as f:
            head = f.read(33)
        first = "".join(chr(b) if 32 <= b < 127 else "." for b in head)
        self.assertIn("\n  #0 %s\n  #1 " % first, data["text/plain"])
        self.assertIn("image/png", data)

    def test_3_short_text(self):
        path = os.path.join(self.tmp.name, "short.txt")
        with open(path, "w") as f:
            f.write("too short")
        err = self.error("fit(net, DataLoader(TextFile('%s', block_size=32), batch_size=4), epochs=1, "
                         "optimizer=AdamW(), loss=CrossEntropyLoss())" % path, timeout=60)
        self.assertIn("short.txt", err["evalue"])
        self.assertIn("fewer than one window", err["evalue"])


if __name__ == "__main__":
    unittest.main()
