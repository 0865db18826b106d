"""A language model on text through a real kernel (issue 29): a small GPT2LMHeadModel trains on
Debian's fortunes as TextFile windows (a character-level model, the vocabulary the bytes),
its loss falls from ln 256 towards the text's entropy, evaluate() scores held-out text per
token, and save() writes Hugging Face's keys; a model whose vocabulary or block size does not
fit the text is refused before anything runs, and a text shorter than one window is the
job's error naming the file."""

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


@unittest.skipUnless(os.path.isfile(FORTUNES), "Debian's fortunes is not installed")
class TextInTheNotebook(taastest.KernelCase):
    tmp_prefix = "taas-text-"
    kernel_env = staticmethod(taastest.job_tmp)
    setup_code = SETUP

    def test_1_train_evaluate_save(self):
        size = os.path.getsize(FORTUNES)
        text = self.result("train.dataset")["text/plain"]
        self.assertIn("Dataset TextFile", text)
        self.assertIn("Block size: 32 (windows of 33 bytes, a vocabulary of 256)", text)
        self.assertIn("Number of datapoints: %d" % ((int(size * 0.9) - 1) // 32), text)
        h = self.result("h = fit(net, train, epochs=3, optimizer=AdamW(lr=3e-3), loss=CrossEntropyLoss(), "
                        "validate=val)\nh", timeout=300)["text/plain"]
        rows = re.findall(r"^ +(\d+) +([0-9.]+) +([0-9.]+) +([0-9.]+) ", h, re.M)
        self.assertEqual([int(r[0]) for r in rows], [1, 2, 3], h)
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
