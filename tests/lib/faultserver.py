#!/usr/bin/python3
"""A real HTTP/1.1 file server for the fetch tests and benchmarks, with faults on request.

Serves the files under --root (GET and HEAD, single byte ranges, ETag, If-None-Match,
keep-alive). It can be slow on purpose -- --latency seconds before every answer and --rate
bytes/s per connection -- which is the "slow storage" of the benchmarks (50 ms, 20 MB/s).

Faults come with the request: `?fault=500,500,ok` makes the first two requests for that exact
URI answer 500 and the later ones succeed. Each comma-separated step is one request:
  NNN        answer status NNN with a short body (404, 403, 500, 503, ...)
  reset      close the connection with a TCP reset before answering
  cut        send the headers and half of the body, then close
  stall      send the headers and 1 KiB of the body, then stall for --stall seconds
  hang       read the request and answer nothing for --stall seconds
  delay:S    wait S seconds, then answer normally
  norange    answer 200 with the whole file, ignoring Range
  newetag    answer normally, but under another ETag (the file "changed")
  redirect:P answer 302 with Location P
  loop       answer 302 with Location this very URI
  ok         answer normally
Counters (requests, connections, the most requests in flight at once, every request seen)
are at GET /_stats as JSON; GET /_reset zeroes them.

It listens on loopback, or with --test-bridge on the address of a test cluster's bridge, which
only that cluster's namespaces reach. The port is written to --portfile once the server listens. The server exits when its parent
dies, so a test that crashes never leaves it running.
"""

import argparse
import email.utils
import http.server
import json
import os
import socket
import struct
import sys
import threading
import time
import urllib.parse


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        self.requests = 0
        self.connections = 0
        self.inflight = 0
        self.max_inflight = 0
        self.per_uri = {}
        self.log = []


STATE = State()
OPTS = None


def parse_range(header, size):
    """(first, last) for a single 'bytes=' range, None for none, 'bad' for unsatisfiable."""
    if not header or not header.startswith("bytes=") or "," in header:
        return None
    spec = header[6:].strip()
    first, _, last = spec.partition("-")
    try:
        if first == "":
            n = int(last)
            if n == 0:
                return "bad"
            return (max(0, size - n), size - 1)
        a = int(first)
        b = int(last) if last else size - 1
    except ValueError:
        return None
    if a >= size or b < a:
        return "bad"
    return (a, min(b, size - 1))


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "faultserver/1"
    # headers and body go out in separate writes: without this, Nagle's algorithm and the
    # client's delayed ACK add 40 ms to many answers, latency nobody asked for
    disable_nagle_algorithm = True

    def setup(self):
        super().setup()
        with STATE.lock:
            STATE.connections += 1
            self.conn_id = STATE.connections

    def log_message(self, fmt, *args):
        if OPTS.verbose:
            sys.stderr.write("faultserver: " + (fmt % args) + "\n")

    def do_HEAD(self):
        self.serve(head=True)

    def do_GET(self):
        self.serve(head=False)

    def send_small(self, status, body, ctype="text/plain"):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def serve(self, head):
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        if url.path == "/_stats":
            with STATE.lock:
                body = json.dumps({
                    "requests": STATE.requests, "connections": STATE.connections,
                    "max_inflight": STATE.max_inflight, "per_uri": STATE.per_uri,
                    "log": STATE.log})
            return self.send_small(200, body, "application/json")
        if url.path == "/_reset":
            with STATE.lock:
                STATE.reset()
            return self.send_small(200, "ok\n")

        with STATE.lock:
            STATE.requests += 1
            n = STATE.per_uri.get(self.path, 0)
            STATE.per_uri[self.path] = n + 1
            STATE.inflight += 1
            STATE.max_inflight = max(STATE.max_inflight, STATE.inflight)
            STATE.log.append({"method": self.command, "uri": self.path,
                              "range": self.headers.get("Range", ""),
                              "conn": self.conn_id, "t": time.time()})
        try:
            steps = ",".join(query.get("fault", [])).split(",") if "fault" in query else []
            step = steps[n] if n < len(steps) else "ok"
            self.answer(url, step, head)
        finally:
            with STATE.lock:
                STATE.inflight -= 1

    def answer(self, url, step, head):
        if OPTS.latency > 0:
            time.sleep(OPTS.latency)
        if step.isdigit():
            return self.send_small(int(step), "fault %s for %s\n" % (step, url.path))
        if step == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        if step == "hang":
            time.sleep(OPTS.stall)
            self.close_connection = True
            return
        if step.startswith("delay:"):
            time.sleep(float(step[6:]))
        if step.startswith("redirect:") or step == "loop":
            self.send_response(302)
            self.send_header("Location", self.path if step == "loop" else step[9:])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return

        rel = urllib.parse.unquote(url.path).lstrip("/")
        path = os.path.realpath(os.path.join(OPTS.root, rel))
        if not path.startswith(os.path.realpath(OPTS.root) + os.sep) or not os.path.isfile(path):
            return self.send_small(404, "no such file: %s\n" % url.path)
        st = os.stat(path)
        size = st.st_size
        etag = '"%x-%x"' % (st.st_mtime_ns, size)
        if step == "newetag":
            etag = '"%x-%x-new"' % (st.st_mtime_ns, size)
        if self.headers.get("If-None-Match") == etag:
            self.send_response(304)
            self.send_header("ETag", etag)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        rng = None if step == "norange" else parse_range(self.headers.get("Range"), size)
        if rng == "bad":
            self.send_response(416)
            self.send_header("Content-Range", "bytes */%d" % size)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        first, last = rng if rng else (0, size - 1)
        length = last - first + 1 if size else 0
        self.send_response(206 if rng else 200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", email.utils.formatdate(st.st_mtime, usegmt=True))
        self.send_header("Content-Length", str(length))
        if rng:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (first, last, size))
        self.end_headers()
        if head:
            return
        with open(path, "rb") as f:
            f.seek(first)
            if step == "cut":
                self.wfile.write(f.read(length // 2))
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if step == "stall":
                self.wfile.write(f.read(min(1024, length)))
                self.wfile.flush()
                time.sleep(OPTS.stall)
                self.close_connection = True
                return
            self.send_body(f, length)

    def send_body(self, f, length):
        start = time.monotonic()
        sent = 0
        chunk = 65536
        while sent < length:
            data = f.read(min(chunk, length - sent))
            if not data:
                break
            self.wfile.write(data)
            sent += len(data)
            if OPTS.rate > 0:
                ahead = sent / OPTS.rate - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def watch_parent(parent):
    while True:
        time.sleep(0.2)
        if os.getppid() != parent:
            os._exit(0)


def main():
    global OPTS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", required=True, help="folder to serve")
    ap.add_argument("--portfile", help="write the port here once listening")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--test-bridge", action="store_true",
                    help="--host is the root namespace's address on a bridge the test made (tests/lib/cluster.py)")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    ap.add_argument("--rate", type=float, default=0.0, help="bytes/s per connection (0: no cap)")
    ap.add_argument("--stall", type=float, default=30.0, help="seconds a stall or hang lasts")
    ap.add_argument("--verbose", action="store_true")
    OPTS = ap.parse_args()
    if not OPTS.host.startswith("127.") and OPTS.host not in ("localhost", "::1") and not OPTS.test_bridge:
        ap.error("--host must be a loopback address, or a test cluster's bridge with --test-bridge")
    server = Server((OPTS.host, OPTS.port), Handler)
    threading.Thread(target=watch_parent, args=(os.getppid(),), daemon=True).start()
    port = server.server_address[1]
    if OPTS.portfile:
        tmp = OPTS.portfile + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.rename(tmp, OPTS.portfile)
    else:
        print(port, flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
