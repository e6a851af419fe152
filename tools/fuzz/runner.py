"""Running ncert for the fuzz runners (mutate.py, values.py): one run, and how it ended.

run_one starts ncert in its own process group and kills the whole group when it outlives its
timeout (a hang); classify turns the exit status, the output streams and the --json report
into an outcome (exit0..exit4, exit_other:N, signal:NAME, hang) and the flags of BAD_FLAGS.
Every live process group is recorded, so an interrupted run can kill them all (stop_all).
Also what both runners do around the runs: a usage error's exit, the seed paths of
--seeds, no core files from crashing children, and a report that is not kept.

Python 3 standard library only. See tools/fuzz/README.md, "Outcomes".
"""

import json
import os
import resource
import signal
import subprocess
import sys
import threading

# Commands that take two dumps: the mutant is the first, its unmodified seed the second.
TWO_INPUT_COMMANDS = ("compare", "forks")

BAD_FLAGS = (
    "exit3_without_json",   # exit 3 without a parseable report holding error.name/message
    "report_missing",       # exit 0/1 without a parseable JSON report
    "invalid_utf8_json",    # the JSON report is not valid UTF-8
    "invalid_utf8_output",  # stdout or stderr is not valid UTF-8
    "escape_in_output",     # a raw ESC (0x1b) byte on stdout or stderr
)


def signal_name(num):
    try:
        return signal.Signals(num).name
    except ValueError:
        return "SIG%d" % num


def build_argv(ncert, cmd, target, other, out_json, memory_limit_mib, hdf5_timeout=0):
    argv = [ncert, cmd, target]
    if cmd in TWO_INPUT_COMMANDS:
        argv.append(other)
    argv += ["--json", out_json, "--threads", "1"]
    if hdf5_timeout:
        argv += ["--hdf5-timeout", "%g" % hdf5_timeout]
    if memory_limit_mib:
        # `ulimit -v` then exec keeps the pid, so a signal still shows in the return code
        argv = ["/bin/sh", "-c", 'ulimit -v %d && exec "$@"' % (memory_limit_mib * 1024),
                "sh"] + argv
    return argv


_LIVE = set()          # pids (= process group ids) of running ncert processes
_LIVE_LOCK = threading.Lock()
_STOP = threading.Event()


def kill_live():
    with _LIVE_LOCK:
        pids = list(_LIVE)
    for pid in pids:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def stop_all():
    """On an interrupt: no new run starts (stopping() turns true) and every live one is killed."""
    _STOP.set()
    kill_live()


def stopping():
    return _STOP.is_set()


def run_one(argv, timeout, env):
    """Runs argv in its own process group. Returns (returncode or None on timeout, out, err)."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True, env=env)
    with _LIVE_LOCK:
        _LIVE.add(proc.pid)
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = b"", b""
        return None, out or b"", err or b""
    finally:
        # also reap stragglers that outlived a normal exit (nothing if the group is gone)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        with _LIVE_LOCK:
            _LIVE.discard(proc.pid)


def _reject_constant(name):
    raise ValueError("non-standard JSON constant " + name)


def classify(rc, out, err, out_json_path):
    """Primary outcome label, bad flags, and whether the outcome is bad."""
    flags = []
    if rc is None:
        outcome = "hang"
    elif rc < 0:
        outcome = "signal:" + signal_name(-rc)
    elif rc in (0, 1, 2, 3, 4):
        outcome = "exit%d" % rc
    else:
        outcome = "exit_other:%d" % rc

    for stream in (out, err):
        try:
            stream.decode("utf-8", "strict")
        except UnicodeDecodeError:
            if "invalid_utf8_output" not in flags:
                flags.append("invalid_utf8_output")
    if b"\x1b" in out or b"\x1b" in err:
        flags.append("escape_in_output")

    report = None
    raw = None
    if rc is not None and rc >= 0 and os.path.isfile(out_json_path):
        with open(out_json_path, "rb") as f:
            raw = f.read()
        try:
            text = raw.decode("utf-8", "strict")
        except UnicodeDecodeError:
            flags.append("invalid_utf8_json")
            text = raw.decode("utf-8", "replace")
        try:
            report = json.loads(text, parse_constant=_reject_constant)
        except ValueError:
            report = None
    if rc == 3:
        error = report.get("error") if isinstance(report, dict) else None
        if not (isinstance(error, dict) and isinstance(error.get("name"), str)
                and isinstance(error.get("message"), str)):
            flags.append("exit3_without_json")
    elif rc in (0, 1):
        if not isinstance(report, dict):
            flags.append("report_missing")
    bad = outcome not in ("exit0", "exit1", "exit3") or bool(flags)
    error_name = None
    if isinstance(report, dict) and isinstance(report.get("error"), dict):
        error_name = report["error"].get("name")
    return outcome, flags, bad, error_name


def tail_text(b, workdir, limit=1500):
    s = b.decode("utf-8", "replace")
    if workdir:
        s = s.replace(workdir, "<workdir>")
    return s[-limit:]


def fail_usage(msg):
    """A usage error: the runner's name, the message, exit 2."""
    print("%s: error: %s" % (os.path.basename(sys.argv[0]), msg), file=sys.stderr)
    sys.exit(2)


def collect_seed_paths(items):
    """--seeds: files, and every *.h5 of a directory (sorted)."""
    paths = []
    for item in items:
        if os.path.isdir(item):
            found = sorted(os.path.join(item, n) for n in os.listdir(item) if n.endswith(".h5"))
            if not found:
                fail_usage("no .h5 file in %s" % item)
            paths += found
        elif os.path.isfile(item):
            paths.append(item)
        else:
            fail_usage("seed %s: no such file or directory" % item)
    return paths


def disable_core_files():
    """No core files from crashing children (the limit is inherited)."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
        resource.setrlimit(resource.RLIMIT_CORE, (0, hard))
    except (ValueError, OSError):
        pass


def discard(path):
    """Removes a run's report that is not kept (--keep not given); absent is fine."""
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
