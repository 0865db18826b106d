"""Hostile but correctly signed messages, sent with raw pyzmq sockets: a replayed message
must not run again (jupyter_client's Session refuses a signature it has seen), and a signed
request the kernel cannot use — numbers beyond 64 bits or a double, a NUL in an object key,
a frame that is not JSON, a message over 64 MiB — must be answered (an error reply that says
why, or a normal one where the oddity is in a field the kernel does not use), never left
without a reply. After each, the kernel still answers kernel_info_request."""

import json
import time
import unittest

from taastest import RawClient, RawKernelCase, execute_content

MIB = 1 << 20


class Hostile(RawKernelCase):
    def shell_until(self, msg_id, sock=None, timeout=30):
        """Every message on sock up to and including the reply to msg_id."""
        sock = sock or self.raw.shell
        got = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            frames = self.raw.recv_raw(sock, 0.1)
            if frames is None:
                continue
            msg = self.raw.parse(frames)
            got.append(msg)
            if msg["parent_header"].get("msg_id") == msg_id:
                return got
        self.fail("no reply to %s within %d s (got %s)"
                  % (msg_id, timeout, [m["msg_type"] for m in got]))

    def still_answers(self):
        """kernel_info_request on shell and control; returns the shell messages that came
        before its reply."""
        raw = self.raw
        before = []
        for sock in (raw.shell, raw.control):
            msg_id = raw.send(sock, "kernel_info_request", {})
            got = self.shell_until(msg_id, sock)
            self.assertEqual(got[-1]["content"]["status"], "ok")
            before += got[:-1]
        self.assertTrue(self.k.km.is_alive())
        return before

    def signed(self, msg_type, content, header=None, metadata=None, buffers=()):
        """Correctly signed frames; content and metadata may be raw bytes."""
        frames, msg_id = self.raw.frames(msg_type, content, header=header, metadata=metadata)
        return frames + list(buffers), msg_id

    def answer(self, frames, msg_id, timeout=30):
        """Sends frames on shell; the one reply to msg_id (asserted to arrive)."""
        self.raw.shell.send_multipart(frames)
        reply = self.shell_until(msg_id, timeout=timeout)[-1]
        self.still_answers()
        return reply

    def assert_error(self, reply, msg_type, *words):
        self.assertEqual(reply["msg_type"], msg_type)
        c = reply["content"]
        self.assertEqual(c["status"], "error", c)
        self.assertEqual(c["ename"], "TaasProtocolError")
        self.assertIsInstance(c["traceback"], list)
        for w in words:
            self.assertIn(w, c["evalue"])
        return c

    # -- replays ----------------------------------------------------------------------

    def test_replayed_execute_runs_once(self):
        raw = self.raw
        frames, msg_id = self.signed("execute_request", execute_content("41 + 1"))
        for _ in range(3):
            raw.shell.send_multipart(frames)
        first = self.shell_until(msg_id)[-1]
        self.assertEqual(first["content"]["status"], "ok")
        count = first["content"]["execution_count"]
        # the same copy on control: its signature is just as used
        raw.control.send_multipart(frames)
        self.assertEqual([m["msg_type"] for m in self.still_answers()], [],
                         "a replayed message was answered")
        time.sleep(0.3)
        for sock in (raw.shell, raw.control):
            self.assertIsNone(raw.recv_raw(sock, 0.1), "a replayed message was answered")
        # one cell ran: the next fresh execute takes the next count
        msg_id = raw.send(raw.shell, "execute_request", execute_content("1"))
        reply = self.shell_until(msg_id)[-1]
        self.assertEqual(reply["content"]["execution_count"], count + 1)

    def test_replayed_kernel_info_is_dropped(self):
        raw = self.raw
        frames, msg_id = self.signed("kernel_info_request", {})
        raw.shell.send_multipart(frames)
        self.shell_until(msg_id)
        raw.shell.send_multipart(frames)
        self.assertEqual([m["msg_type"] for m in self.still_answers()], [])

    # -- numbers jansson refuses ------------------------------------------------------

    def test_cursor_pos_beyond_64_bits(self):
        for req in ("complete_request", "inspect_request"):
            with self.subTest(req=req):
                content = b'{"code": "pri", "cursor_pos": 1' + b"0" * 30 + b', "detail_level": 0}'
                frames, msg_id = self.signed(req, content)
                c = self.assert_error(self.answer(frames, msg_id), req.replace("_request", "_reply"),
                                      "cursor_pos 1e30 is out of range")
                self.assertIn(req, c["evalue"])

    def test_history_n_beyond_64_bits(self):
        content = (b'{"hist_access_type": "tail", "n": 1' + b"0" * 20
                   + b', "output": false, "raw": true}')
        frames, msg_id = self.signed("history_request", content)
        self.assert_error(self.answer(frames, msg_id), "history_reply", "n 1e20 is out of range")
        content = b'{"hist_access_type": "range", "session": 0, "start": -1e999, "stop": 0}'
        frames, msg_id = self.signed("history_request", content)
        self.assert_error(self.answer(frames, msg_id), "history_reply", "start -1.797", "out of range")

    def test_beyond_a_double(self):
        # in a field the kernel uses: an error that names it
        frames, msg_id = self.signed("complete_request", b'{"code": "pri", "cursor_pos": 1e999}')
        self.assert_error(self.answer(frames, msg_id), "complete_reply",
                          "cursor_pos 1.7976931348623157e308 is out of range")
        # anywhere else: served as if it were not there
        frames, msg_id = self.signed("kernel_info_request", b'{"x": [1e999, -1E+400]}',
                                     metadata=b'{"deep": {"y": 123456789012345678901234567890}}')
        reply = self.answer(frames, msg_id)
        self.assertEqual(reply["content"]["status"], "ok")
        header = self.raw.header("execute_request")
        hdr = self.raw.session.pack(header)[:-1] + b', "extra": 1e999}'
        content = json.dumps(execute_content("6 * 7")).encode()[:-1] + b', "n": 1e999}'
        frames = [RawClient.DELIM, self.raw.sign([hdr, b"{}", b"{}", content]), hdr, b"{}",
                  b"{}", content]
        reply = self.answer(frames, header["msg_id"])
        self.assertEqual(reply["content"]["status"], "ok")

    # -- strings jansson refuses ------------------------------------------------------

    def test_nul_in_object_key(self):
        frames, msg_id = self.signed("kernel_info_request", b'{"a\\u0000b": 1}')
        self.assertEqual(self.answer(frames, msg_id)["content"]["status"], "ok")
        content = (b'{"code": "1 + 1", "silent": false, "store_history": false, '
                   b'"user_expressions": {"x\\u0000": "1"}, "allow_stdin": false}')
        frames, msg_id = self.signed("execute_request", content)
        self.assertEqual(self.answer(frames, msg_id)["content"]["status"], "ok")

    def test_lone_surrogate_escape(self):
        content = b'{"code": "x = \\ud800 \\udcff", "k\\udc00": 1}'
        frames, msg_id = self.signed("is_complete_request", content)
        reply = self.answer(frames, msg_id)
        self.assertEqual(reply["msg_type"], "is_complete_reply")

    # -- frames that cannot be decoded ------------------------------------------------

    def test_undecodable_content_is_answered(self):
        cases = {
            "not json": (b"{not json", "the content frame is not valid JSON"),
            "a string": (b'"print(1)"', "the content frame is JSON but not an object"),
            "empty": (b"", "the content frame is not valid JSON"),
        }
        for name, (content, why) in cases.items():
            with self.subTest(case=name):
                frames, msg_id = self.signed("complete_request", content)
                self.assert_error(self.answer(frames, msg_id), "complete_reply",
                                  "complete_request: " + why)
        frames, msg_id = self.signed("execute_request", execute_content("1"),
                                     metadata=b"[1, 2]")
        c = self.assert_error(self.answer(frames, msg_id), "execute_reply",
                              "the metadata frame is JSON but not an object")
        self.assertIn("execution_count", c)

    def test_header_without_msg_type_is_dropped(self):
        hdr = self.raw.session.pack({"msg_id": "no-type", "session": "s", "username": "u",
                                     "version": "5.3"})
        frames = [RawClient.DELIM, self.raw.sign([hdr, b"{}", b"{}", b"{}"]), hdr, b"{}", b"{}",
                  b"{}"]
        self.raw.shell.send_multipart(frames)
        self.assertEqual([m["msg_type"] for m in self.still_answers()], [])

    # -- size --------------------------------------------------------------------------

    def test_over_64_mib_in_the_signed_frames(self):
        code = "1  # " + "x" * (64 * MIB + 1024)
        frames, msg_id = self.signed("execute_request", execute_content(code))
        size = sum(len(f) for f in frames)
        t0 = time.monotonic()
        c = self.assert_error(self.answer(frames, msg_id, timeout=60), "execute_reply",
                              "the request is %d bytes; the kernel takes at most 64 MiB" % size)
        self.assertLess(time.monotonic() - t0, 30)
        self.assertIn("execution_count", c)

    def test_over_256_mib_in_one_buffer(self):
        # a single frame of 300 MiB, under the 1 GiB that ZeroMQ takes at all: an answer, no disconnect
        frames, msg_id = self.signed("kernel_info_request", {}, buffers=[bytes(300 * MIB)])
        size = sum(len(f) for f in frames)
        self.assert_error(self.answer(frames, msg_id, timeout=60), "kernel_info_reply",
                          "the request is %d bytes" % size)

    def test_too_many_frames(self):
        frames, msg_id = self.signed("kernel_info_request", {}, buffers=[b"b"] * 2000)
        self.assert_error(self.answer(frames, msg_id), "kernel_info_reply",
                          "the request has %d frames; the kernel takes at most 1024" % len(frames))


if __name__ == "__main__":
    unittest.main()
