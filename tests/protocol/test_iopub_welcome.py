"""IOPub's welcome: the kernel's iopub is an XPUB, and every new subscription gets a status
of the kernel's state (starting before any request, then busy or idle), so a client that
subscribes late still hears one and knows its subscription is up (ZeroMQ's slow joiner
drops whatever was published before). Raw SUB sockets, as any client makes them; nothing
waits on time but for an answer that must come."""

import json
import time
import unittest

import zmq

import taastest

PROMPT = 30   # how long a test waits for what the kernel must do at once
HELD = 600    # a sleep no test waits out


def iopub_url(info):
    return "%s://%s:%d" % (info["transport"], info["ip"], info["iopub_port"])


def first_message(url, timeout=PROMPT):
    """The first message a fresh subscriber receives: (msg_type, content, parent msg_id)."""
    ctx = zmq.Context()
    try:
        s = ctx.socket(zmq.SUB)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.SUBSCRIBE, b"")
        s.connect(url)
        if not s.poll(int(timeout * 1000)):
            return None
        frames = s.recv_multipart()
        i = frames.index(b"<IDS|MSG>")
        header, parent, _, content = (json.loads(f) for f in frames[i + 2:i + 6])
        return header["msg_type"], content, parent.get("msg_id")
    finally:
        ctx.destroy(linger=0)


class Welcome(unittest.TestCase):
    def test_1_before_any_request_a_subscriber_hears_starting(self):
        from jupyter_client.manager import KernelManager

        taastest.install_test_kernelspec()
        km = KernelManager(kernel_name=taastest.KERNEL_NAME)
        km.start_kernel()
        try:
            url = iopub_url(km.get_connection_info(session=False))
            # a subscriber that comes after the kernel's own "starting" went out
            for _ in range(3):
                self.assertEqual(first_message(url), ("status", {"execution_state": "starting"}, None))
        finally:
            km.shutdown_kernel(now=True)

    def test_2_later_subscribers_hear_idle_or_busy(self):
        k = taastest.Kernel()
        try:
            url = iopub_url(k.connection_info())
            self.assertEqual(first_message(url), ("status", {"execution_state": "idle"}, None))
            msg_id = k.send("shell", "execute_request", {"code": "sleep(%d)" % HELD, "silent": False})
            deadline = time.monotonic() + PROMPT
            while time.monotonic() < deadline:
                k.drain(0.05)
                if any(m["msg_type"] == "execute_input" for m in k._pending["iopub"].get(msg_id, [])):
                    break
            self.assertEqual(first_message(url), ("status", {"execution_state": "busy"}, None))
            # the client already subscribed hears each welcome too, with no parent: nothing
            # of the running cell's changes
            k.send("control", "interrupt_request")
            reply = k.reply(msg_id, timeout=PROMPT)
            self.assertEqual(reply["content"]["ename"], "KeyboardInterrupt")
            reply, msgs = k.execute("40 + 2")
            self.assertEqual(taastest.result_text(msgs), "42")
        finally:
            k.close()


if __name__ == "__main__":
    unittest.main()
