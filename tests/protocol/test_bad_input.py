"""Bad input from a real client: raw pyzmq sockets send what jupyter_client never would.
A message that is unsigned, badly signed, truncated or without a usable header is dropped;
a signed one whose other frames are not JSON objects, or that is too large, is answered
with an error reply. Neither is ever executed: every bad message's code is
`print("EXECUTED")`, and after each one a normal signed execute must still work. A bad
connection file is refused at start with a message that names the problem. (More hostile
signed messages, and replays: test_hostile_messages.py.)"""

import hashlib
import hmac
import json
import os
import re
import subprocess
import tempfile
import time
import unittest

import taastest
from taastest import RawClient, RawKernelCase, execute_content

BAD_CODE = 'print("EXECUTED")'


def documented_limit():
    """The kernel's largest accepted message (bytes), as kernel/protocol/wire.h defines it
    (TAAS_WIRE_MAX_BYTES, "(size_t)64 << 20")."""
    path = os.path.join(taastest.SOURCE_DIR, "kernel", "protocol", "wire.h")
    with open(path) as f:
        text = f.read()
    m = re.search(r"#define\s+TAAS_WIRE_MAX_BYTES\s+\(\(size_t\)\s*(\d+)\s*<<\s*(\d+)\)", text)
    if not m:
        raise AssertionError("cannot find TAAS_WIRE_MAX_BYTES in %s: update documented_limit()"
                             % path)
    return int(m.group(1)) << int(m.group(2))


class BadMessages(RawKernelCase):
    n = 0  # follow-ups sent: each prints its own marker

    def follow_up(self, sock=None):
        """A normal signed execute after a bad message: it must be answered, and nothing
        the bad message asked for may have run. Returns the shell messages that arrived
        before the follow-up's reply (replies to the bad message, if any)."""
        raw = self.raw
        sock = sock or raw.shell
        type(self).n += 1
        marker = "OK-%d" % self.n
        msg_id = raw.send(raw.shell, "execute_request", execute_content('print("%s")' % marker))
        before = []
        reply = None
        deadline = time.monotonic() + 15
        while reply is None and time.monotonic() < deadline:
            for s in {sock, raw.shell}:
                frames = raw.recv_raw(s, 0.05)
                if frames is None:
                    continue
                msg = raw.parse(frames)
                if msg["parent_header"].get("msg_id") == msg_id:
                    reply = msg
                else:
                    before.append(msg)
        self.assertIsNotNone(reply, "the kernel does not answer after the bad message")
        self.assertEqual(reply["content"]["status"], "ok")
        iopub = raw.iopub_until_idle(msg_id)
        streams = "".join(m["content"]["text"] for m in iopub if m["msg_type"] == "stream")
        self.assertNotIn("EXECUTED", streams, "a bad message was executed")
        self.assertIn(marker, streams)
        self.assertTrue(self.k.km.is_alive())
        return before

    def send_bad(self, frames, sock=None):
        (sock or self.raw.shell).send_multipart(frames)
        return self.follow_up(sock)

    def good_parts(self, msg_type="execute_request", content=None):
        raw = self.raw
        header = raw.header(msg_type)
        parts = [header, {}, {}, content if content is not None else execute_content(BAD_CODE)]
        return [p if isinstance(p, bytes) else raw.session.pack(p) for p in parts]

    def assert_no_reply(self, before):
        self.assertEqual([m["msg_type"] for m in before], [],
                         "a dropped message must not be answered")

    def test_unsigned(self):
        parts = self.good_parts()
        self.assert_no_reply(self.send_bad([RawClient.DELIM, b""] + parts))

    def test_badly_signed(self):
        parts = self.good_parts()
        wrong = hmac.new(b"not the key", digestmod=hashlib.sha256)
        for p in parts:
            wrong.update(p)
        cases = {
            "wrong key": wrong.hexdigest().encode(),
            "not hex": b"z" * 64,
            "short": self.raw.sign(parts)[:-2],
            "too long": self.raw.sign(parts) + b"00",
        }
        for name, sig in cases.items():
            with self.subTest(signature=name):
                self.assert_no_reply(self.send_bad([RawClient.DELIM, sig] + parts))
        with self.subTest(signature="content changed after signing"):
            sig = self.raw.sign(parts)
            changed = parts[:3] + [self.raw.session.pack(execute_content(BAD_CODE + "\n1"))]
            self.assert_no_reply(self.send_bad([RawClient.DELIM, sig] + changed))

    def test_unsigned_shutdown_on_control_is_ignored(self):
        raw = self.raw
        parts = self.good_parts("shutdown_request", {"restart": False})
        before = self.send_bad([RawClient.DELIM, b""] + parts, raw.control)
        self.assert_no_reply(before)
        time.sleep(0.3)
        self.assertTrue(self.k.km.is_alive(), "an unsigned shutdown_request was obeyed")

    def test_truncated(self):
        parts = self.good_parts()
        cases = {
            "no delimiter": parts,
            "delimiter only": [RawClient.DELIM],
            "no frames after signature": [RawClient.DELIM, self.raw.sign([])],
            "header and parent only": [RawClient.DELIM, self.raw.sign(parts[:2])] + parts[:2],
            "no content": [RawClient.DELIM, self.raw.sign(parts[:3])] + parts[:3],
            "empty message": [b""],
        }
        for name, frames in cases.items():
            with self.subTest(case=name):
                self.assert_no_reply(self.send_bad(frames))

    def signed(self, parts):
        return [RawClient.DELIM, self.raw.sign(parts)] + parts

    def test_not_json(self):
        parts = self.good_parts()
        # no header to answer: dropped
        dropped = {
            "header": [b"\xff\xfe not json"] + parts[1:],
            "header is a list": [b"[1, 2]"] + parts[1:],
            "header without msg_type": [self.raw.session.pack(
                {"msg_id": "x1", "session": "s", "username": "u", "version": "5.3"})] + parts[1:],
            "msg_type not a string": [self.raw.session.pack(
                {"msg_id": "x2", "session": "s", "username": "u", "version": "5.3",
                 "msg_type": 5})] + parts[1:],
        }
        for name, p in dropped.items():
            with self.subTest(case=name):
                self.assert_no_reply(self.send_bad(self.signed(p)))
        # signed, with a header: an error reply says why
        answered = {
            "content": parts[:3] + [b"{not json: print(\"EXECUTED\")"],
            "content is a string": parts[:3] + [json.dumps(BAD_CODE).encode()],
            "empty content frame": parts[:3] + [b""],
        }
        for name, p in answered.items():
            with self.subTest(case=name):
                self.assert_error_reply(self.send_bad(self.signed(p)), "the content frame")

    def assert_error_reply(self, before, *words):
        self.assertEqual([m["msg_type"] for m in before], ["execute_reply"])
        c = before[0]["content"]
        self.assertEqual(c["status"], "error")
        self.assertEqual(c["ename"], "TaasProtocolError")
        for w in words:
            self.assertIn(w, c["evalue"])

    def test_invalid_utf8_in_code_is_answered(self):
        raw = self.raw
        header = raw.header("execute_request")
        content = (b'{"code": "print(\\"EXEC\xff\xfeUTED\\")\\nprint(\\"caf\xc3\\")", '
                   b'"silent": false, "store_history": true, "user_expressions": {}, '
                   b'"allow_stdin": false, "stop_on_error": false}')
        parts = [raw.session.pack(header), b"{}", b"{}", content]
        before = self.send_bad(self.signed(parts))
        replies = [m for m in before if m["parent_header"].get("msg_id") == header["msg_id"]]
        self.assertEqual(len(replies), 1, "a signed execute with invalid UTF-8 got no reply")
        self.assertIn(replies[0]["content"]["status"], ("ok", "error"))

    def test_nul_in_code_is_answered(self):
        raw = self.raw
        msg_id = raw.send(raw.shell, "execute_request", execute_content('print("a\x00b")'))
        before = self.follow_up()
        replies = [m for m in before if m["parent_header"].get("msg_id") == msg_id]
        self.assertEqual(len(replies), 1, "a signed execute with a NUL in the code got no reply")
        self.assertIn(replies[0]["content"]["status"], ("ok", "error"))

    def test_oversized(self):
        limit = documented_limit()
        code = BAD_CODE + "  # " + "x" * (limit + 1024)
        t0 = time.monotonic()
        before = self.send_bad(self.signed(self.good_parts(content=execute_content(code))))
        self.assert_error_reply(before, "the kernel takes at most 64 MiB")
        self.assertLess(time.monotonic() - t0, 20)

    def test_too_many_frames(self):
        parts = self.good_parts()
        frames = self.signed(parts) + [b"buffer"] * 2000
        self.assert_error_reply(self.send_bad(frames), "the kernel takes at most 1024")

    def test_unknown_msg_type(self):
        raw = self.raw
        msg_id = raw.send(raw.shell, "bogus_request", execute_content(BAD_CODE))
        before = self.follow_up()
        replies = [m for m in before if m["parent_header"].get("msg_id") == msg_id]
        self.assertEqual(len(replies), 1, "an unknown msg_type got no reply")
        self.assertEqual(replies[0]["content"]["status"], "error")

    def test_lone_surrogate_escape(self):
        for code in ('print("\\udcff")', 'print("\\ud83d\\ude00")', "'\\udcff'"):
            with self.subTest(code=code):
                reply, msgs = self.k.execute(code)
                status = reply["content"]["status"]
                if status == "ok":
                    text = taastest.stream_text(msgs) + "".join(
                        m["content"]["data"]["text/plain"]
                        for m in taastest.only(msgs, "execute_result"))
                    self.assertIn("\ufffd", text)
                else:
                    err = taastest.error_of(msgs)
                    self.assertTrue(err["ename"].startswith("Taas"), err["ename"])
                    self.assertIn("surrogate", err["evalue"])
                reply, msgs = self.k.execute('"\\u00e9" + "\\U0001F600"')
                self.assertEqual(taastest.result_text(msgs), "'é😀'")


class BadConnectionFile(unittest.TestCase):
    """The kernel refuses to start, with a message naming the problem and the file."""

    def run_kernel(self, text):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "kernel-test.json")
            if text is not None:
                with open(path, "w") as f:
                    f.write(text)
            p = subprocess.run([taastest.kernel_binary(), "-f", path], capture_output=True,
                               text=True, timeout=10)
        return p.returncode, p.stderr, path

    def good(self, **changes):
        # ports that are valid numbers; the kernel must refuse before it binds any
        info = {"transport": "tcp", "ip": "127.0.0.1", "shell_port": 49301,
                "iopub_port": 49302, "stdin_port": 49303, "control_port": 49304,
                "hb_port": 49305, "key": "k",
                "signature_scheme": "hmac-sha256", "kernel_name": "taas"}
        for key, value in changes.items():
            if value is None:
                info.pop(key)
            else:
                info[key] = value
        return json.dumps(info)

    def test_other_signature_scheme(self):
        for scheme in ("hmac-md5", "hmac-sha1", "none"):
            with self.subTest(scheme=scheme):
                rc, err, path = self.run_kernel(self.good(signature_scheme=scheme))
                self.assertNotEqual(rc, 0)
                self.assertIn(scheme, err)
                self.assertIn("hmac-sha256", err)

    def test_missing_file(self):
        rc, err, path = self.run_kernel(None)
        self.assertNotEqual(rc, 0)
        self.assertIn(path, err)

    def test_not_json(self):
        rc, err, path = self.run_kernel("{ this is not json")
        self.assertNotEqual(rc, 0)
        self.assertIn(path, err)
        self.assertIn("JSON", err)

    def test_missing_port(self):
        rc, err, path = self.run_kernel(self.good(shell_port=None))
        self.assertNotEqual(rc, 0)
        self.assertIn("shell_port", err)

    def test_bad_port(self):
        rc, err, path = self.run_kernel(self.good(hb_port="five"))
        self.assertNotEqual(rc, 0)
        self.assertIn("hb_port", err)


if __name__ == "__main__":
    unittest.main()
