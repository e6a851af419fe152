"""What the Python tests under tests/ share: the check that NCERT_BINARY names the built binary,
a scratch directory per test class, and a JSON report with its timings removed (the only values
that differ between two runs of the same inputs).

Scratch directories go under NCERT_TEST_TMP (CTest sets it) or a fresh temporary directory.
"""
import os
import tempfile


def require_binary(test, ncert):
    """Fails `test` unless `ncert` names an executable file."""
    if not (ncert and os.path.isfile(ncert) and os.access(ncert, os.X_OK)):
        test.fail("NCERT_BINARY must name the built ncert binary (got %r)" % ncert)


def scratch(name, suite):
    """A fresh directory for one test class: NAME-* under NCERT_TEST_TMP, else ncert-SUITE-NAME-*
    in the system's temporary directory."""
    base = os.environ.get("NCERT_TEST_TMP")
    if base:
        os.makedirs(base, exist_ok=True)
        return tempfile.mkdtemp(prefix=name + "-", dir=base)
    return tempfile.mkdtemp(prefix="ncert-%s-%s-" % (suite, name))


def strip_timing(j):
    """A JSON value without its timing_* keys, at every depth."""
    if isinstance(j, dict):
        return {k: strip_timing(v) for k, v in j.items() if not k.startswith("timing_")}
    if isinstance(j, list):
        return [strip_timing(v) for v in j]
    return j
