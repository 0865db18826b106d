#!/usr/bin/python3
"""Runs Debian's nginx on a free loopback port, serving a folder, for tests and benchmarks.

    nginx.py --root DIR --state DIR [--portfile FILE] [--tls]

Everything nginx writes (configuration, pid, logs, temp files) goes into --state. The access
log, state/access.log, has one line per request:
    <connection serial> <requests on it> <status> <method> <uri with query> <range> <msec> <bytes>
so a test can count connections (reuse) and ranges served at the same time (parallelism).
With --tls it serves HTTPS with a self-signed certificate (made with the openssl command in
state/), which clients do not trust unless told to.
The port is written to --portfile (default state/port) once nginx listens. This process
stays in the foreground as nginx's supervisor: SIGTERM or SIGINT stops nginx, and so does the
death of this process's parent, so a test never leaves nginx running.
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import time

CONF = """\
{user}
worker_processes 1;
daemon off;
master_process on;
pid {state}/nginx.pid;
error_log {state}/error.log warn;
events {{ worker_connections 512; }}
http {{
    log_format taas '$connection $connection_requests $status $request_method $request_uri '
                    '"$http_range" $msec $body_bytes_sent';
    access_log {state}/access.log taas;
    client_body_temp_path {state}/body;
    proxy_temp_path {state}/proxy;
    fastcgi_temp_path {state}/fastcgi;
    uwsgi_temp_path {state}/uwsgi;
    scgi_temp_path {state}/scgi;
    types {{ application/octet-stream bin; }}
    default_type application/octet-stream;
    sendfile on;
    keepalive_timeout 60s;
    keepalive_requests 100000;
    server {{
        listen 127.0.0.1:{port}{tls};
        {tls_files}
        root {root};
        location / {{ }}
    }}
}}
"""


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def set_pdeathsig():
    """Runs in the child: nginx gets SIGTERM if this supervisor dies."""
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def make_certificate(state):
    key, cert = os.path.join(state, "key.pem"), os.path.join(state, "cert.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", "/CN=127.0.0.1"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return "ssl_certificate %s; ssl_certificate_key %s;" % (cert, key)


def start(root, state, tls, tries=5):
    """Starts nginx; returns (process, port). A port taken between the choice and nginx's
    bind is retried with another."""
    user = "user root;" if os.geteuid() == 0 else ""
    tls_files = make_certificate(state) if tls else ""
    for _ in range(tries):
        port = free_port()
        conf = os.path.join(state, "nginx.conf")
        with open(conf, "w") as f:
            f.write(CONF.format(user=user, state=state, port=port, root=os.path.abspath(root),
                                tls=" ssl" if tls else "", tls_files=tls_files))
        proc = subprocess.Popen(["nginx", "-p", state, "-c", conf, "-e", state + "/error.log"],
                                preexec_fn=set_pdeathsig, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            if listening(port):
                return proc, port
            time.sleep(0.02)
        if proc.poll() is None:
            proc.terminate()
            proc.wait()
    log = open(os.path.join(state, "error.log")).read() if os.path.exists(
        os.path.join(state, "error.log")) else ""
    sys.exit("nginx.py: nginx did not start:\n" + log)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--state", required=True)
    ap.add_argument("--portfile")
    ap.add_argument("--tls", action="store_true", help="HTTPS with a self-signed certificate")
    args = ap.parse_args()
    os.makedirs(args.state, exist_ok=True)
    state = os.path.abspath(args.state)
    parent = os.getppid()
    proc, port = start(args.root, state, args.tls)

    stopping = []

    def stop(*_):
        stopping.append(1)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    portfile = args.portfile or os.path.join(state, "port")
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % port)
    os.rename(portfile + ".tmp", portfile)
    while not stopping and proc.poll() is None and os.getppid() == parent:
        time.sleep(0.1)
    if proc.poll() is None:
        proc.terminate()  # nginx's fast shutdown
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
