"""Jobs the test holds, never by timing (test_resume, test_detach): taas-worker is reached
through a wrapper (the kernel's TAAS_WORKER) that keeps loader worker 3 of the training loader
from starting until the test opens its gate. Rank 1 trains item 3 at step 2 (items k = 2s + r),
so a job with the gate shut trains step 1, checkpoints, and waits there for as long as the
test likes. A file `cpu` beside the gate gives the workers TAAS_CPU (a host that runs less)."""

import os
import stat

import taastest

FASHION = "/usr/share/datasets/fashion-mnist"
# the test split (10,000 samples) as training data: 2 epochs of 50 steps on 2 ranks
SETUP = """\
transform = Compose([ToTensor(), Normalize((0.2860,), (0.3530,))])
train = DataLoader(FashionMNIST(root='%s', train=False, transform=transform), batch_size=100, shuffle=True)
test = DataLoader(FashionMNIST(root='%s', train=False, transform=transform), batch_size=1000)
register(train)
""" % (FASHION, FASHION)
NET = ("Sequential(Conv2d(1, 8, 3), ReLU(), MaxPool2d(2), Dropout(0.25), Flatten(), Linear(1352, 32), "
       "BatchNorm1d(32), ReLU(), Linear(32, 10), LogSoftmax(dim=1))")

WRAPPER = """#!/bin/sh
# the test's hold on loader worker 3: it starts once the gate is open
case " $* " in
  *" loader "*" --worker 3 "*) [ -e '%(dir)s/open' ] || read -r _ < '%(dir)s/gate' ;;
esac
# a host whose CPU runs less: the kernel set the test writes in cpu, for this worker only
[ -e '%(dir)s/cpu' ] && export TAAS_CPU="$(cat '%(dir)s/cpu')"
exec '%(real)s' "$@"
"""


def fit_call(name, extra="", every="1"):
    """The fit of model `name` (2 epochs of the test split, seed 11) as h_<name> = fit(...)."""
    return ("h_%s = fit(%s, train, epochs=2, loss=NLLLoss(), optimizer=Adam(lr=0.002), "
            "scheduler=StepLR(step_size=1, gamma=0.5), validate=test, seed=11, checkpoint_every=%s%s)"
            % (name, name, every, extra))


def kernel_env(tmp):
    """The kernel's environment for held jobs in tmp: the wrapper, its gate, job folders in tmp/jobs."""
    wrapper = os.path.join(tmp, "taas-worker")
    with open(wrapper, "w") as f:
        f.write(WRAPPER % {"dir": tmp, "real": taastest.worker_binary()})
    os.chmod(wrapper, stat.S_IRWXU)
    os.mkfifo(os.path.join(tmp, "gate"))
    jobs = os.path.join(tmp, "jobs")
    os.mkdir(jobs)
    # a stop waits for the ranks' last weights as long as a test holds them
    return {"TAAS_WORKER": wrapper, "TMPDIR": jobs, "TAAS_STOP_GRACE_S": "600"}


def gate(tmp, open_):
    """Opens the gate for the loader workers that start from now on, or shuts it."""
    path = os.path.join(tmp, "open")
    if open_:
        open(path, "w").close()
    elif os.path.exists(path):
        os.unlink(path)


def release_held(tmp):
    """Opens the gate and lets the loader worker that waits at it go on."""
    gate(tmp, True)

    def write():
        try:
            fd = os.open(os.path.join(tmp, "gate"), os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # ENXIO: the worker has not opened its end yet
            return False
        try:
            os.write(fd, b"go\n")
        finally:
            os.close(fd)
        return True
    if not taastest.wait_until(write, 60):
        raise AssertionError("no loader worker waits at the gate")


def trainer_pids(parent):
    """The trainer ranks below parent (other tests' jobs may run beside it)."""
    return sorted(p for p, args in taastest.descendants(parent).items()
                  if args.startswith(taastest.worker_binary()) and " trainer " in args)


def history(rows_text):
    """A History's rows without the times: epoch, train loss, val loss, val accuracy."""
    return [row.split()[:4] for row in rows_text.splitlines()[2:]]
