"""What the hostile-input tests share: the binary, scratch space, running ncert, reading its
refusals.

The binary is NCERT_BINARY (CTest sets it); scratch files go to NCERT_TEST_TMP (CTest sets it)
or a temporary directory. Nothing outside the repository and the scratch directory is read.
"""
import glob
import json
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tools", "fuzz"))
sys.path.insert(0, os.path.join(REPO, "python"))
sys.path.insert(0, os.path.join(REPO, "tests", "common"))

import ncert_testing  # noqa: E402

NCERT = os.environ.get("NCERT_BINARY", "")

# `REFUSED  error <name> (<code>): <message>` (docs/cli.md)
REFUSED = re.compile(r"^REFUSED  error (?P<name>[a-z0-9-]+) \((?P<code>\d+)\): (?P<message>.*)$",
                     re.MULTILINE)


def require_binary(test):
    ncert_testing.require_binary(test, NCERT)


def scratch(name):
    """A fresh directory for one test class."""
    return ncert_testing.scratch(name, "hostile")


class Run:
    """How one ncert run ended."""

    def __init__(self, argv, returncode, out, err, maxrss_kib, hung):
        self.argv = argv
        self.returncode = returncode  # negative: killed by that signal; None: hung
        self.out = out                # bytes
        self.err = err
        self.maxrss_kib = maxrss_kib  # run_measured(): peak RSS of ncert and its waited children
        self.hung = hung

    @property
    def text(self):
        return self.out.decode("utf-8", "replace")

    @property
    def err_text(self):
        return self.err.decode("utf-8", "replace")

    def refused(self):
        """The REFUSED line's (name, code, message), or None."""
        m = REFUSED.search(self.text)
        return (m.group("name"), int(m.group("code")), m.group("message")) if m else None

    def describe(self):
        return "`%s` -> %s\nstdout (tail):\n%s\nstderr (tail):\n%s" % (
            " ".join(self.argv), "hung" if self.hung else self.returncode,
            self.text[-1500:], self.err_text[-1500:])


def _limits(address_space):
    def apply():
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if address_space:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    return apply


def run(args, timeout=120, env=None, address_space=None, stdout=subprocess.PIPE, cwd=None,
        preexec=None):
    """Runs ncert ARGS in its own process group; a run still alive after `timeout` is killed
    (with its group) and reported as hung. `address_space` caps RLIMIT_AS (bytes)."""
    argv = [NCERT] + [str(a) for a in args]
    full_env = dict(os.environ)
    full_env.setdefault("OMP_NUM_THREADS", "1")
    if env:
        full_env.update(env)
    limits = _limits(address_space)

    def pre():
        limits()
        if preexec:
            preexec()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout,
                            stderr=subprocess.PIPE, env=full_env, cwd=cwd,
                            start_new_session=True, preexec_fn=pre)
    hung = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        hung = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
    return Run(argv, None if hung else proc.returncode, out or b"", err or b"", None, hung)


def run_measured(args, timeout=120, env=None):
    """Like run(), but waits with wait4 to get this run's own peak RSS (KiB), which includes
    the isolated child that ncert waited for."""
    argv = [NCERT] + [str(a) for a in args]
    full_env = dict(os.environ)
    full_env.setdefault("OMP_NUM_THREADS", "1")
    if env:
        full_env.update(env)
    with tempfile.TemporaryFile() as out_f, tempfile.TemporaryFile() as err_f:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out_f, stderr=err_f,
                                env=full_env, start_new_session=True, preexec_fn=_limits(None))
        # wait4 blocks: a watchdog kills the group if the run outlives `timeout`.
        done = threading.Event()
        killed = []

        def watchdog():
            if not done.wait(timeout):
                killed.append(True)
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        threading.Thread(target=watchdog, daemon=True).start()
        _, status, usage = os.wait4(proc.pid, 0)
        done.set()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out_f.seek(0)
        err_f.seek(0)
        hung = bool(killed)
        return Run(argv, None if hung else proc.returncode, out_f.read(), err_f.read(),
                   usage.ru_maxrss, hung)


def load_report(path):
    """The --json report, parsed strictly (valid UTF-8, no NaN/Infinity)."""
    with open(path, "rb") as f:
        raw = f.read()

    def reject(name):
        raise ValueError("non-standard JSON constant " + name)
    return json.loads(raw.decode("utf-8", "strict"), parse_constant=reject)


def temp_leftovers(directory):
    """Temporary report files (`<report>.tmp.<pid>`) left in a directory."""
    return sorted(glob.glob(os.path.join(directory, "*.tmp.*")))


_DEMO = {}


def demo_dumps(directory):
    """The dumps `ncert demo` writes, made once per process into `directory`."""
    if directory not in _DEMO:
        r = run(["demo", "--dir", directory, "--force", "--quiet"], timeout=300)
        names = sorted(n for n in os.listdir(directory) if n.endswith(".h5")) \
            if os.path.isdir(directory) else []
        if not names:
            raise AssertionError("`ncert demo` wrote no dump:\n" + r.describe())
        _DEMO[directory] = {n: os.path.join(directory, n) for n in names}
    return _DEMO[directory]
