"""Shared fixtures of the ncert_dump tests: the ncert binary, temporary folders, a small valid
projection whose arguments each test can override."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import unittest

import h5py
import numpy as np

from ncert_dump import Segment, bf16_from_f32, f32_from_bf16, quantize_affine
from ncert_dump import h5out, rules  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NCERT = os.environ.get("NCERT_BINARY", os.path.join(REPO, "build", "release", "certify", "ncert"))
HAVE_NCERT = os.path.isfile(NCERT) and os.access(NCERT, os.X_OK)


def run_ncert(*args):
    """(exit code, stdout, stderr) of one ncert command."""
    p = subprocess.run([NCERT, *args], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def ncert_json(command, path, *extra):
    """(exit code, JSON report) of `ncert <command> --json - <path>`."""
    code, out, err = run_ncert(command, "--json", "-", "--threads", "1", *extra, path)
    try:
        return code, json.loads(out)
    except json.JSONDecodeError:
        raise AssertionError(f"ncert {command} printed no JSON (exit {code}): {out}\n{err}")


class TempDirCase(unittest.TestCase):
    """A test case with a fresh temporary folder `self.dir`."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ncert_dump_test_")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)

    def tmp(self, name="dump.h5"):
        return os.path.join(self.dir, name)


def write_raw(path, members):
    """A file with a valid root and `members` ({"/projections/q": node, ...}) written as
    given, without any validation: how a careless exporter would write them. It declares the
    newest version the reader's table reads, so that every member is judged on its own."""
    with h5py.File(path, "w") as f:
        h5out.write_attrs(f, {"ncert_schema": "ncert-dump", "ncert_schema_version": max(rules.VERSIONS),
                              "engine": "test", "build": "raw"})
        for full, node in members.items():
            root, name = full.strip("/").split("/", 1)
            h5out.write_node(h5out.require_group(f, root), name, node)


def base_projection(rng=None):
    """Keyword arguments of a small valid packed projection (R=2, B=2, cap=2, P=3, K=16,
    N=8 in two bf16 segments, f32 outputs) for tests to break one rule at a time."""
    rng = rng or np.random.default_rng(7)
    m, k, n = 4, 16, 8
    x = bf16_from_f32(rng.standard_normal((m, k)))
    w = bf16_from_f32(rng.standard_normal((n, k)) / 4)
    y = (f32_from_bf16(x).astype(np.float64) @ f32_from_bf16(w).astype(np.float64).T)
    y = y.astype(np.float32)
    return dict(
        x=x, x_dtype="bf16",
        weights=[Segment("bf16", 0, 4, values=w[:4]), Segment("bf16", 4, 8, values=w[4:])],
        accumulator="f32-rn", output_dtype="f32", selector=np.array([0, 1, 2], np.int32),
        requests=2, block_rows=2, cap=2, commit_counts=np.array([2, 1], np.int32),
        y_unpacked=y)


def zero_point_segment(rows=4, k=16, row_begin=0, group_size=8, rng=None, **changes):
    """A valid zero-point AF4 segment (f32 scales, u8 zero points) over random codes."""
    rng = rng or np.random.default_rng(13)
    groups = k // group_size
    seg = Segment("af4", row_begin, row_begin + rows, codes=rng.integers(0, 16, (rows, k)),
                  scales=(rng.standard_normal((rows, groups)) / 16).astype(np.float32),
                  zero_points=rng.integers(0, 16, (rows, groups)), group_size=group_size,
                  variant="zero-point", packing="u32-lsb")
    for key, v in changes.items():
        setattr(seg, key, v)
    return seg


def af4_segment(rows=8, k=16, row_begin=0, packing="u32-lsb", group_size=8, rng=None):
    """A valid affine AF4 segment (bf16 scales) over `rows` x `k` random weights."""
    rng = rng or np.random.default_rng(11)
    codes, scales, biases = quantize_affine(rng.standard_normal((rows, k)), group_size, "bf16")
    return Segment("af4", row_begin, row_begin + rows, codes=codes, scales=bf16_from_f32(scales),
                   biases=bf16_from_f32(biases), scale_dtype="bf16", group_size=group_size,
                   variant="affine", packing=packing)
