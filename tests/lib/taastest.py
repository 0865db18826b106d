"""Shared helpers for the Python tests: they run this build's taas-kernel through real
Jupyter clients. The kernel binary comes from $TAAS_KERNEL (ctest sets it), and a private
kernelspec directory is put first on JUPYTER_PATH so that the tests never depend on (or
touch) an installed kernelspec."""

import atexit
import json
import os
import shutil
import subprocess
import tempfile

SOURCE_DIR = os.environ.get(
    "TAAS_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
)
KERNEL_NAME = "taas"


def kernel_binary():
    path = os.environ.get("TAAS_KERNEL")
    if not path:
        raise RuntimeError("TAAS_KERNEL is not set: run the tests through ctest")
    return os.path.abspath(path)


def install_test_kernelspec():
    """Writes kernels/taas/kernel.json (argv -> this build's binary) into a temporary
    JUPYTER_PATH entry and returns that directory. Idempotent per process."""
    if os.environ.get("_TAAS_TEST_JUPYTER_PATH"):
        return os.environ["_TAAS_TEST_JUPYTER_PATH"]
    root = tempfile.mkdtemp(prefix="taas-jupyter-")
    atexit.register(shutil.rmtree, root, True)
    spec_dir = os.path.join(root, "kernels", KERNEL_NAME)
    os.makedirs(spec_dir)
    with open(os.path.join(SOURCE_DIR, "share/jupyter/kernels/taas/kernel.json")) as f:
        spec = json.load(f)
    spec["argv"][0] = kernel_binary()
    with open(os.path.join(spec_dir, "kernel.json"), "w") as f:
        json.dump(spec, f)
    os.environ["JUPYTER_PATH"] = root + os.pathsep + os.environ.get("JUPYTER_PATH", "")
    os.environ["_TAAS_TEST_JUPYTER_PATH"] = root
    return root


def taas_processes():
    """PIDs of live taas-kernel processes started from this build's binary."""
    binary = kernel_binary()
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    pids = []
    for line in out.splitlines():
        pid, _, args = line.strip().partition(" ")
        if args.startswith(binary + " "):
            pids.append(int(pid))
    return pids
