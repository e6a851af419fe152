#!/usr/bin/env python3
"""Deterministic mutation runner for ncert.

Corrupts valid dumps (bit flips, zeroed and duplicated blocks, truncation, appended garbage,
targeted damage to HDF5 metadata) and runs ncert on every mutant, tallying how each run ends.
The contract under test (docs/cli.md): a corrupt dump ends in exit 3 with a JSON report, or
in 0/1 when the damage happens to leave it valid; never a signal, a hang, exit 4 or exit 2.

Python 3 standard library only. See tools/fuzz/README.md.

Exit status: 0 no bad outcome, 1 at least one bad outcome, 2 usage error.
"""

import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

import random

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"

# Round-robin order: mutant i of a seed applies KINDS[i % len(KINDS)].
KINDS = (
    "flip_head",      # random byte flips in the first 4 KiB (superblock, root object header)
    "flip_any",       # random byte flips anywhere in the file
    "flip_meta",      # byte flips inside an HDF5 metadata structure
    "meta_int",       # an interesting integer (0, -1, 2^31, file size...) written into metadata
    "zero_block",     # 64 B .. 4 KiB zeroed
    "dup_block",      # 64 B .. 4 KiB copied from one offset over another
    "truncate",       # truncated to a random length
    "truncate_tail",  # truncated to 1..64 bytes below the file size
    "append",         # 1 B .. 4 KiB of random garbage appended
)

# Signatures of HDF5 metadata structures (file format spec, "Disk Format: Level 1/2").
SIGNATURES = (
    b"OHDR", b"OCHK", b"TREE", b"HEAP", b"GCOL", b"SNOD", b"FRHP", b"FHDB", b"FHIB",
    b"FSHD", b"FSSE", b"BTHD", b"BTIN", b"BTLF", b"EAHD", b"EAIB", b"EADB", b"EASB",
    b"FAHD", b"FADB", b"SMTB", b"SMLI",
)

MSG_NAMES = {
    0x00: "nil", 0x01: "dataspace", 0x02: "link-info", 0x03: "datatype", 0x04: "fill-old",
    0x05: "fill", 0x06: "link", 0x07: "external-files", 0x08: "layout", 0x09: "bogus",
    0x0A: "group-info", 0x0B: "filter-pipeline", 0x0C: "attribute", 0x0D: "comment",
    0x0E: "mtime-old", 0x0F: "shared-msg-table", 0x10: "continuation", 0x11: "symbol-table",
    0x12: "mtime", 0x13: "btree-k", 0x14: "driver-info", 0x15: "attribute-info",
    0x16: "refcount",
}

# Seeds are normalized (modification times set to this) so that dumps written at different
# times give the same mutants. 2010-01-01T00:00:00Z.
FIXED_MTIME = 1262304000

SMOKE_MUTANTS = 75
SMOKE_SEEDS = ("good.h5", "logits-a.h5", "fork-near-tie-a.h5", "stale-compact-slot.h5")
SMOKE_SEED_COUNT = 4

# Commands that take two dumps: the mutant is the first, its unmodified seed the second.
TWO_INPUT_COMMANDS = ("compare", "forks")

BAD_FLAGS = (
    "exit3_without_json",   # exit 3 without a parseable report holding error.name/message
    "report_missing",       # exit 0/1 without a parseable JSON report
    "invalid_utf8_json",    # the JSON report is not valid UTF-8
    "invalid_utf8_output",  # stdout or stderr is not valid UTF-8
    "escape_in_output",     # a raw ESC (0x1b) byte on stdout or stderr
)


# --------------------------------------------------------------------------------------------
# HDF5 map: where the metadata lives (best effort; a seed we cannot parse still gets mutated)
# --------------------------------------------------------------------------------------------

class Region:
    __slots__ = ("category", "start", "end", "label")

    def __init__(self, category, start, end, label):
        self.category = category
        self.start = start
        self.end = end
        self.label = label


class H5Map:
    """Superblock, v1 object headers (and their messages), and signature-bearing structures."""

    def __init__(self, data):
        self.data = data
        self.size = len(data)
        self.regions = []
        self.mtime_fields = []  # (offset, kind): kind 'u32' (msg 0x12) or 'ascii' (msg 0x0E)
        self.ohdr_count = 0
        self.so = 8
        self.sl = 8
        self.base = 0
        self.group_k = 16
        self._seen_ohdr = set()
        self._seen_tree = set()
        try:
            self._parse()
        except (struct.error, IndexError, ValueError, RecursionError):
            pass
        self._scan_signatures()
        unique = {}
        for r in self.regions:
            unique.setdefault((r.start, r.end, r.category), r)
        self.regions = sorted(unique.values(), key=lambda r: (r.start, r.end, r.category))
        self.by_category = {}
        for r in self.regions:
            self.by_category.setdefault(r.category, []).append(r)
        self.categories = sorted(self.by_category)
        # object headers hold the datatype/dataspace/layout/attribute messages: weight them up
        self.weights = [3 if c in ("ohdr", "OHDR") else 1 for c in self.categories]

    # little-endian readers of the sizes the superblock declares
    def _uint(self, off, width):
        if off < 0 or off + width > self.size:
            raise ValueError("out of range")
        return int.from_bytes(self.data[off:off + width], "little")

    def _addr(self, off):
        return self._uint(off, self.so)

    def _undef(self, value, width):
        return value == (1 << (8 * width)) - 1

    def _add(self, category, start, end, label):
        start = max(0, start)
        end = min(self.size, end)
        if end > start:
            self.regions.append(Region(category, start, end, label))

    def _parse(self):
        sb = None
        for at in [0] + [512 << i for i in range(20)]:
            if at + 8 > self.size:
                break
            if self.data[at:at + 8] == HDF5_SIGNATURE:
                sb = at
                break
        if sb is None:
            return
        version = self.data[sb + 8]
        if version in (0, 1):
            self.so = self.data[sb + 13]
            self.sl = self.data[sb + 14]
            if self.so not in (2, 4, 8) or self.sl not in (2, 4, 8):
                return
            self.group_k = self._uint(sb + 18, 2) or 16
            p = sb + (24 if version == 0 else 28)
            self.base = self._addr(p)
            p += 4 * self.so
            # root group symbol table entry
            entry = p
            end = entry + 2 * self.so + 24
            self._add("superblock", sb, end, "superblock v%d" % version)
            root = self._addr(entry + self.so)
            self._ohdr(root, "/")
            cache = self._uint(entry + 2 * self.so, 4)
            if cache == 1:
                heap_data = self._heap(self._addr(entry + 2 * self.so + 8 + self.so))
                self._btree(self._addr(entry + 2 * self.so + 8), "/", heap_data)
        elif version in (2, 3):
            self.so = self.data[sb + 9]
            self.sl = self.data[sb + 10]
            if self.so not in (2, 4, 8) or self.sl not in (2, 4, 8):
                return
            self._add("superblock", sb, sb + 12 + 4 * self.so + 4, "superblock v%d" % version)
            # v2 object headers ("OHDR") are found by the signature scan

    def _ohdr(self, addr, path, depth=0):
        if depth > 64 or self._undef(addr, self.so):
            return
        a = self.base + addr
        if a in self._seen_ohdr or a < 0 or a + 16 > self.size:
            return
        if self.data[a] != 1 or self.data[a + 1] != 0:
            return  # not a v1 object header (v2 ones carry "OHDR" and are scanned)
        self._seen_ohdr.add(a)
        self.ohdr_count += 1
        nmsgs = self._uint(a + 2, 2)
        hsize = self._uint(a + 8, 4)
        self._add("ohdr", a, a + 16, "object header v1 %s prefix" % path)
        chunks = [(a + 16, hsize)]
        seen = 0
        while chunks and seen < nmsgs and seen < 4096:
            start, length = chunks.pop(0)
            p = start
            end = min(start + length, self.size)
            while p + 8 <= end and seen < nmsgs:
                mtype = self._uint(p, 2)
                msize = self._uint(p + 2, 2)
                d = p + 8
                if d + msize > end:
                    break
                seen += 1
                name = MSG_NAMES.get(mtype, "type 0x%04x" % mtype)
                self._add("ohdr", p, d + msize, "object header v1 %s message %s" % (path, name))
                if mtype == 0x10 and msize >= self.so + self.sl:
                    off = self._addr(d)
                    ln = self._uint(d + self.so, self.sl)
                    if not self._undef(off, self.so):
                        chunks.append((self.base + off, ln))
                elif mtype == 0x12 and msize >= 8 and self.data[d] == 1:
                    self.mtime_fields.append((d + 4, "u32"))
                elif mtype == 0x0E and msize >= 14:
                    self.mtime_fields.append((d, "ascii"))
                elif mtype == 0x11 and msize >= 2 * self.so:
                    heap_data = self._heap(self._addr(d + self.so))
                    self._btree(self._addr(d), path, heap_data, depth + 1)
                elif mtype == 0x06:
                    self._link(d, msize, path, depth)
                p = d + msize

    def _heap(self, addr):
        """Local heap: returns the file offset of its data segment (link names), or None."""
        if self._undef(addr, self.so):
            return None
        a = self.base + addr
        if a + 8 + 2 * self.sl + self.so > self.size or self.data[a:a + 4] != b"HEAP":
            return None
        seg_size = self._uint(a + 8, self.sl)
        seg = self._addr(a + 8 + 2 * self.sl)
        if self._undef(seg, self.so):
            return None
        self._add("HEAP-data", self.base + seg, self.base + seg + min(seg_size, 4096),
                  "local heap data segment at 0x%x" % (self.base + seg))
        return self.base + seg

    def _btree(self, addr, path, heap_data, depth=0):
        """v1 group B-tree: children are SNODs (level 0) or further nodes."""
        if depth > 64 or self._undef(addr, self.so):
            return
        a = self.base + addr
        if a in self._seen_tree or a + 8 + 2 * self.so > self.size:
            return
        if self.data[a:a + 4] != b"TREE" or self.data[a + 4] != 0:
            return
        self._seen_tree.add(a)
        level = self.data[a + 5]
        used = self._uint(a + 6, 2)
        p = a + 8 + 2 * self.so
        key = self.sl
        for i in range(min(used, 4096)):
            child = self._addr(p + key + i * (key + self.so))
            if level > 0:
                self._btree(child, path, heap_data, depth + 1)
            else:
                self._snod(child, path, heap_data, depth + 1)

    def _snod(self, addr, path, heap_data, depth):
        if self._undef(addr, self.so):
            return
        a = self.base + addr
        if a + 8 > self.size or self.data[a:a + 4] != b"SNOD":
            return
        n = self._uint(a + 6, 2)
        esize = 2 * self.so + 24
        for i in range(min(n, 4096)):
            e = a + 8 + i * esize
            if e + esize > self.size:
                break
            hdr = self._addr(e + self.so)
            name = "#%d" % i
            if heap_data is not None:
                n0 = heap_data + self._addr(e)
                n1 = self.data.find(b"\0", n0, min(self.size, n0 + 256))
                if n0 < self.size and n1 > n0:
                    name = self.data[n0:n1].decode("utf-8", "replace")
            self._ohdr(hdr, path.rstrip("/") + "/" + name, depth + 1)

    def _link(self, d, msize, path, depth):
        """Link message (0x06): follow hard links."""
        end = d + msize
        if self.data[d] != 1:
            return
        flags = self.data[d + 1]
        p = d + 2
        ltype = 0
        if flags & 0x08:
            ltype = self.data[p]
            p += 1
        if flags & 0x04:
            p += 8
        if flags & 0x10:
            p += 1
        width = (1, 2, 4, 8)[flags & 3]
        nlen = self._uint(p, width)
        p += width
        name = self.data[p:p + nlen].decode("utf-8", "replace")
        p += nlen
        if ltype == 0 and p + self.so <= end:
            sub = path.rstrip("/") + "/" + name
            self._ohdr(self._addr(p), sub, depth + 1)

    def _scan_signatures(self):
        data = self.data
        for sig in SIGNATURES:
            start = 0
            name = sig.decode()
            while True:
                i = data.find(sig, start)
                if i < 0:
                    break
                start = i + 1
                length = 256
                try:
                    if sig == b"SNOD":
                        length = 8 + self._uint(i + 6, 2) * (2 * self.so + 24)
                    elif sig == b"HEAP":
                        length = 8 + 2 * self.sl + self.so
                    elif sig == b"GCOL":
                        length = self._uint(i + 8, self.sl)
                    elif sig == b"TREE" and data[i + 4] == 0:
                        k = self.group_k
                        length = 8 + 2 * self.so + (2 * k + 1) * self.sl + 2 * k * self.so
                except ValueError:
                    pass
                length = max(16, min(length, 4096))
                self._add(name, i, i + length, "%s structure at 0x%x" % (name, i))

    def normalize(self, buf):
        """Set every modification time to FIXED_MTIME; returns how many were changed."""
        changed = 0
        for off, kind in self.mtime_fields:
            if kind == "u32":
                new = struct.pack("<I", FIXED_MTIME)
                if buf[off:off + 4] != new:
                    buf[off:off + 4] = new
                    changed += 1
            else:
                new = b"20100101000000"
                if buf[off:off + 14] != new:
                    buf[off:off + 14] = new
                    changed += 1
        return changed


# --------------------------------------------------------------------------------------------
# Seeds and mutants
# --------------------------------------------------------------------------------------------

class Seed:
    def __init__(self, path, name, data, normalized, mtimes_fixed):
        self.path = path            # as given (or in the demo directory)
        self.name = name            # base name; it seeds the random generator
        self.stem = name[:-3] if name.endswith(".h5") else name
        self.data = bytes(data)     # normalized content the mutants derive from
        self.normalized = normalized
        self.mtimes_fixed = mtimes_fixed
        self.map = H5Map(self.data)
        self.sha256 = hashlib.sha256(self.data).hexdigest()
        self.run_path = None        # the file baselines and two-input commands use


def mutant_rng(seed, seed_name, index):
    return random.Random("ncert-mutate|%d|%s|%d" % (seed, seed_name, index))


def _flip_mask(r):
    return (1 << r.randrange(8)) if r.random() < 0.5 else r.randrange(1, 256)


def _pick_region(r, hmap):
    if not hmap.categories:
        return None
    pick = r.randrange(sum(hmap.weights))
    for cat, w in zip(hmap.categories, hmap.weights):
        if pick < w:
            break
        pick -= w
    regions = hmap.by_category[cat]
    return regions[r.randrange(len(regions))]


def _interesting(r, width, size, current):
    top = (1 << (8 * width)) - 1
    values = [0, 1, 2, 8, 0x7F, 0x80, 0xFF, top, top - 1, top >> 1, (top >> 1) + 1,
              size, size - 1, size + 1, size * 2, current + 1, current - 1, current * 2,
              current ^ top, r.randrange(top + 1)]
    return values[r.randrange(len(values))] & top


def make_mutant(seed, seed_value, index, kind):
    """Returns (bytes, mutation record). Depends only on the seed's bytes, name and index."""
    r = mutant_rng(seed_value, seed.name, index)
    src = seed.data
    size = len(src)
    buf = bytearray(src)
    m = {"kind": kind}
    if kind in ("flip_head", "flip_any", "flip_meta"):
        if kind == "flip_meta":
            region = _pick_region(r, seed.map)
            if region is None:
                lo, hi = 0, size
                m["region"] = "none found: whole file"
            else:
                lo, hi = region.start, region.end
                m["region"] = region.label
            n = r.randint(1, 4)
        else:
            lo, hi = 0, (min(size, 4096) if kind == "flip_head" else size)
            n = r.randint(1, 8)
        flips = []
        if hi > lo:
            for _ in range(n):
                off = r.randrange(lo, hi)
                mask = _flip_mask(r)
                buf[off] ^= mask
                flips.append([off, mask])
        m["flips"] = flips  # [offset, xor mask]
    elif kind == "meta_int":
        region = _pick_region(r, seed.map)
        if region is None:
            lo, hi = 0, size
            m["region"] = "none found: whole file"
        else:
            lo, hi = region.start, region.end
            m["region"] = region.label
        width = (1, 2, 4, 8)[r.randrange(4)]
        if hi - lo < width:
            lo = max(0, hi - width)
        off = r.randrange(lo, max(lo + 1, hi - width + 1))
        width = min(width, size - off)
        if width > 0:
            current = int.from_bytes(buf[off:off + width], "little")
            value = _interesting(r, width, size, current)
            buf[off:off + width] = value.to_bytes(width, "little")
            m.update(offset=off, width=width, old=current, new=value)
    elif kind in ("zero_block", "dup_block"):
        length = min(r.randint(64, 4096), size)
        if r.random() < 0.5 and seed.map.regions:
            region = _pick_region(r, seed.map)
            dst = region.start
            m["target"] = region.label
        else:
            dst = r.randrange(max(1, size - length + 1))
            m["target"] = "random offset"
        length = max(0, min(length, size - dst))
        if kind == "zero_block":
            buf[dst:dst + length] = bytes(length)
            m.update(offset=dst, length=length)
        else:
            s = r.randrange(max(1, size - length + 1))
            buf[dst:dst + length] = src[s:s + length]
            m.update(offset=dst, length=length, source=s)
    elif kind == "truncate":
        new = r.randrange(max(1, size))
        del buf[new:]
        m.update(new_size=new, old_size=size)
    elif kind == "truncate_tail":
        new = max(0, size - r.randint(1, 64))
        del buf[new:]
        m.update(new_size=new, old_size=size)
    elif kind == "append":
        n = r.randint(1, 4096)
        buf += r.randbytes(n)
        m.update(length=n, old_size=size)
    else:
        raise ValueError(kind)
    if bytes(buf) == src:
        m["unchanged"] = True
    return bytes(buf), m


def describe(m):
    k = m["kind"]
    if k in ("flip_head", "flip_any", "flip_meta"):
        s = "%s: %d flip(s) at %s" % (k, len(m["flips"]), ", ".join(
            "0x%x^0x%02x" % (o, x) for o, x in m["flips"]))
        if "region" in m:
            s += " in %s" % m["region"]
    elif k == "meta_int":
        s = "meta_int: %d-byte field at 0x%x: %d -> %d in %s" % (
            m.get("width", 0), m.get("offset", 0), m.get("old", 0), m.get("new", 0),
            m.get("region"))
    elif k == "zero_block":
        s = "zero_block: %d bytes at 0x%x (%s)" % (m["length"], m["offset"], m["target"])
    elif k == "dup_block":
        s = "dup_block: %d bytes from 0x%x over 0x%x (%s)" % (
            m["length"], m["source"], m["offset"], m["target"])
    elif k in ("truncate", "truncate_tail"):
        s = "%s: %d -> %d bytes" % (k, m["old_size"], m["new_size"])
    elif k == "append":
        s = "append: %d random bytes after %d" % (m["length"], m["old_size"])
    else:
        s = k
    if m.get("unchanged"):
        s += " (no byte changed)"
    return s


# --------------------------------------------------------------------------------------------
# Running ncert
# --------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------

def fail_usage(msg):
    print("mutate.py: error: " + msg, file=sys.stderr)
    sys.exit(2)


def collect_seed_paths(items):
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


def make_demo_seeds(ncert, workdir, timeout):
    d = os.path.join(workdir, "seeds")
    argv = [ncert, "demo", "--dir", d, "--force", "--quiet"]
    try:
        rc, out, err = run_one(argv, max(timeout, 120), os.environ.copy())
    except OSError as e:
        fail_usage("cannot run %s: %s" % (ncert, e))
    paths = sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(".h5")) \
        if os.path.isdir(d) else []
    if not paths:
        fail_usage("`ncert demo` wrote no dump (exit %s): %s" % (rc, tail_text(err, None, 400)))
    if rc not in (0, 1):
        print("mutate.py: warning: `ncert demo` ended with %s; using the %d dump(s) it wrote"
              % (rc, len(paths)), file=sys.stderr)
    return paths


def pick_smoke(seeds):
    chosen = [s for name in SMOKE_SEEDS for s in seeds if s.name == name]
    for s in sorted(seeds, key=lambda s: s.name):
        if len(chosen) >= SMOKE_SEED_COUNT:
            break
        if s not in chosen:
            chosen.append(s)
    return chosen[:SMOKE_SEED_COUNT]


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="mutate.py",
        description="Corrupt valid ncert dumps deterministically and run ncert on every "
                    "mutant; exit 0 when no run crashed, hung, exited 2 or 4, or broke the "
                    "report contract, 1 otherwise, 2 on usage errors.")
    p.add_argument("--ncert", required=True, help="the ncert binary")
    p.add_argument("--seeds", nargs="+", metavar="DIR_OR_FILE",
                   help="valid .h5 dumps (directories: every *.h5 in them); default: the "
                        "dumps `ncert demo` writes")
    p.add_argument("--mutants", type=int, default=None,
                   help="mutants per seed file (default 100; 30 with --smoke)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--commands", nargs="+", default=None, metavar="CMD",
                   help="ncert commands run on every mutant (default: inspect check); "
                        "compare/forks get the unmodified seed as second input")
    p.add_argument("--kinds", nargs="+", default=None, metavar="KIND", choices=KINDS,
                   help="mutation kinds, applied round-robin (default: all): " + " ".join(KINDS))
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds per ncert run before it counts as a hang (default 20)")
    p.add_argument("--hdf5-timeout", type=float, default=None, metavar="SEC",
                   help="passed to ncert as --hdf5-timeout (default: a quarter of --timeout, so "
                        "that a mutant hanging libhdf5 ends in ncert's own refusal, hdf5-hung, "
                        "before the runner calls it a hang; 0: not passed, ncert's default)")
    p.add_argument("--jobs", type=int, default=None,
                   help="mutants run in parallel (default: number of CPUs)")
    p.add_argument("--workdir", default=None,
                   help="where mutants and reports go (default: a temporary directory)")
    p.add_argument("--keep", action="store_true",
                   help="keep the work directory and every mutant in it")
    p.add_argument("--keep-failures", metavar="DIR", default=None,
                   help="copy every mutant with a bad outcome here, with a .txt on how to "
                        "reproduce it")
    p.add_argument("--json", metavar="PATH", default=None,
                   help="write the tally and every bad outcome as JSON")
    p.add_argument("--only", nargs="+", metavar="MUTANT_ID", default=None,
                   help="regenerate and run only these mutants (ids as in the report, "
                        "e.g. good.0007); no baseline runs")
    p.add_argument("--no-normalize", action="store_true",
                   help="use the seeds byte for byte (by default modification times in v1 "
                        "object headers are set to a fixed value, so seeds written at "
                        "different times give the same mutants)")
    p.add_argument("--memory-limit", type=int, default=0, metavar="MIB",
                   help="address-space limit per ncert run (ulimit -v; 0 = none, the default; "
                        "do not use with sanitizer builds)")
    p.add_argument("--smoke", action="store_true",
                   help="CI preset: %d mutants on each of %d seeds (%s, chosen from the seed "
                        "set), timeout 20 s" % (SMOKE_MUTANTS, SMOKE_SEED_COUNT,
                                                ", ".join(SMOKE_SEEDS)))
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    a = p.parse_args(argv)
    if a.mutants is None:
        a.mutants = SMOKE_MUTANTS if a.smoke else 100
    if a.timeout is None:
        a.timeout = 20.0
    if a.hdf5_timeout is None:
        a.hdf5_timeout = a.timeout / 4
    if a.jobs is None:
        a.jobs = os.cpu_count() or 1
    if a.commands is None:
        a.commands = ["inspect", "check"]
    if a.kinds is None:
        a.kinds = list(KINDS)
    if a.mutants < 0:
        p.error("--mutants must be >= 0")
    if a.jobs < 1:
        p.error("--jobs must be >= 1")
    if not a.timeout > 0:
        p.error("--timeout must be > 0")
    if a.hdf5_timeout < 0:
        p.error("--hdf5-timeout must be >= 0")
    if a.memory_limit < 0:
        p.error("--memory-limit must be >= 0")
    for c in a.commands:
        if not re.fullmatch(r"[a-z][a-z0-9-]*", c):
            p.error("--commands: %r is not a command name" % c)
    if not (os.path.isfile(a.ncert) and os.access(a.ncert, os.X_OK)):
        p.error("--ncert %s: not an executable file" % a.ncert)
    a.ncert = os.path.abspath(a.ncert)
    a.from_demo = not a.seeds
    return a


def new_tally(commands):
    return {c: {"runs": 0, "bad": 0, "outcomes": {}, "flags": {}, "error_names": {},
                "by_kind": {}} for c in commands}


def add_to_tally(t, kind, outcome, flags, bad, error_name):
    t["runs"] += 1
    t["bad"] += 1 if bad else 0
    t["outcomes"][outcome] = t["outcomes"].get(outcome, 0) + 1
    for f in flags:
        t["flags"][f] = t["flags"].get(f, 0) + 1
    if outcome == "exit3" and error_name:
        t["error_names"][error_name] = t["error_names"].get(error_name, 0) + 1
    k = t["by_kind"].setdefault(kind, {"runs": 0, "bad": 0, "outcomes": {}})
    k["runs"] += 1
    k["bad"] += 1 if bad else 0
    k["outcomes"][outcome] = k["outcomes"].get(outcome, 0) + 1


def sort_dict(d):
    return {k: d[k] for k in sorted(d)}


def outcome_order(label):
    fixed = ["exit0", "exit1", "exit3", "exit2", "exit4"]
    if label in fixed:
        return (0, fixed.index(label), "")
    if label.startswith("exit_other"):
        return (1, 0, label)
    if label.startswith("signal:"):
        return (2, 0, label)
    return (3, 0, label)


def print_table(tally, commands, out=sys.stdout):
    labels = {"exit0": "exit 0 (pass)", "exit1": "exit 1 (check failed)",
              "exit3": "exit 3 (refused)", "exit2": "exit 2 (usage)  BAD",
              "exit4": "exit 4 (internal)  BAD", "hang": "hang (timeout)  BAD"}
    rows = ["exit0", "exit1", "exit3", "exit2", "exit4"]
    extra = set()
    for c in commands:
        extra.update(k for k in tally[c]["outcomes"] if k not in rows and k != "hang")
    rows += sorted(extra, key=outcome_order) + ["hang"]
    w0 = max([24] + [len(labels.get(r, r)) + 6 for r in rows])
    wc = max([9] + [len(c) + 2 for c in commands])
    print("%-*s" % (w0, "outcome") + "".join("%*s" % (wc, c) for c in commands), file=out)
    print("%-*s" % (w0, "runs") + "".join("%*d" % (wc, tally[c]["runs"]) for c in commands),
          file=out)
    for r in rows:
        name = labels.get(r)
        if name is None:
            name = (r.replace("signal:", "signal ") + "  BAD") if r.startswith("signal:") \
                else r.replace("exit_other:", "exit ") + "  BAD"
        print("%-*s" % (w0, name) + "".join(
            "%*d" % (wc, tally[c]["outcomes"].get(r, 0)) for c in commands), file=out)
    for f in BAD_FLAGS:
        if f in ("exit3_without_json", "escape_in_output") or any(
                tally[c]["flags"].get(f) for c in commands):
            print("%-*s" % (w0, f + "  BAD") + "".join(
                "%*d" % (wc, tally[c]["flags"].get(f, 0)) for c in commands), file=out)
    print("%-*s" % (w0, "bad runs") + "".join("%*d" % (wc, tally[c]["bad"]) for c in commands),
          file=out)


def print_kind_table(tally, commands, kinds, out=sys.stdout):
    print("\nbad runs by mutation kind (bad/runs):", file=out)
    wc = max([14] + [len(c) + 2 for c in commands])
    print("%-16s" % "kind" + "".join("%*s" % (wc, c) for c in commands), file=out)
    for k in kinds:
        cells = []
        for c in commands:
            e = tally[c]["by_kind"].get(k, {"runs": 0, "bad": 0})
            cells.append("%*s" % (wc, "%d/%d" % (e["bad"], e["runs"])))
        print("%-16s" % k + "".join(cells), file=out)


def write_repro(path_txt, mutant_file, rec, runs, args, seed):
    lines = [
        "mutant %s: seed %s (sha256 %s%s), index %d, --seed %d" % (
            rec["id"], seed.name, seed.sha256,
            ", modification times normalized" if seed.normalized else "", rec["index"],
            args.seed),
        "mutation: " + describe(rec["mutation"]),
        "",
        "outcomes:",
    ]
    for r in runs:
        lines.append("  ncert %s -> %s%s" % (r["command"], r["outcome"],
                                             (" [" + ", ".join(r["flags"]) + "]")
                                             if r["flags"] else ""))
    if any(r["outcome"] == "hang" for r in runs):
        lines.append("  (hang: still running after --timeout %g s; run it alone with a longer "
                     "timeout to tell a loop from a slow run)" % args.timeout)
    lines += ["", "reproduce (from this directory):"]
    for r in runs:
        if r["bad"]:
            other = " SEED.h5" if r["command"] in TWO_INPUT_COMMANDS else ""
            lines.append("  ncert %s %s%s --json out.json --threads 1" % (
                r["command"], mutant_file, other))
    first = next(r for r in runs if r["bad"])
    lines += ["", "debug:",
              "  gdb -batch -ex run -ex bt --args ncert %s %s --threads 1" % (
                  first["command"], mutant_file),
              "", "regenerate (from the repository root):",
              "  python3 tools/fuzz/mutate.py --ncert NCERT%s --seed %d --only %s "
              "--keep-failures DIR%s%s" % (
                  "" if args.from_demo else " --seeds " + os.path.abspath(seed.path),
                  args.seed, rec["id"],
                  "" if args.kinds == list(KINDS) else " --kinds " + " ".join(args.kinds),
                  "" if seed.normalized else " --no-normalize")]
    if args.from_demo:
        lines.append("  (no --seeds: the seed is the `ncert demo` dump %s, modification times "
                     "normalized)" % seed.name)
    if first.get("stderr_tail"):
        lines += ["", "stderr (tail) of `ncert %s`:" % first["command"], first["stderr_tail"]]
    with open(path_txt, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    t0 = time.monotonic()

    # no core files from crashing children (the limit is inherited)
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
        resource.setrlimit(resource.RLIMIT_CORE, (0, hard))
    except (ValueError, OSError):
        pass

    own_workdir = args.workdir is None
    workdir = os.path.abspath(args.workdir or tempfile.mkdtemp(prefix="ncert-mutate-"))
    os.makedirs(workdir, exist_ok=True)
    mutant_dir = os.path.join(workdir, "mutants")
    report_dir = os.path.join(workdir, "reports")
    base_dir = os.path.join(workdir, "baseline")
    created = []  # only what this run created is removed at the end
    for d in (mutant_dir, report_dir, base_dir, os.path.join(workdir, "seeds")):
        if not os.path.exists(d):
            created.append(d)
    for d in (mutant_dir, report_dir, base_dir):
        os.makedirs(d, exist_ok=True)
    if args.keep_failures:
        os.makedirs(args.keep_failures, exist_ok=True)

    try:
        if args.seeds:
            paths = collect_seed_paths(args.seeds)
        else:
            paths = make_demo_seeds(args.ncert, workdir, args.timeout)

        seeds = []
        used = {}
        for pth in paths:
            with open(pth, "rb") as f:
                raw = bytearray(f.read())
            name = os.path.basename(pth)
            fixed = 0
            if not args.no_normalize:
                fixed = H5Map(bytes(raw)).normalize(raw)
            s = Seed(pth, name, raw, not args.no_normalize, fixed)
            n = used.get(s.stem, 0)
            used[s.stem] = n + 1
            if n:
                s.stem = "%s~%d" % (s.stem, n + 1)
            seeds.append(s)
        if args.smoke:
            seeds = pick_smoke(seeds)
        if not seeds:
            fail_usage("no seed")

        for i, s in enumerate(seeds):
            s.run_path = os.path.join(base_dir, s.stem + ".h5")
            with open(s.run_path, "wb") as f:
                f.write(s.data)

        # the work list: (seed index, mutant index)
        tasks = []
        if args.only:
            by_stem = {s.stem: i for i, s in enumerate(seeds)}
            for mid in args.only:
                m = re.fullmatch(r"(.+)\.(\d+)", mid)
                if not m or m.group(1) not in by_stem:
                    fail_usage("--only %s: no such mutant (ids are SEEDSTEM.NNNN; seeds: %s)"
                               % (mid, ", ".join(sorted(by_stem))))
                tasks.append((by_stem[m.group(1)], int(m.group(2))))
            tasks = sorted(set(tasks))
        else:
            tasks = [(si, k) for si in range(len(seeds)) for k in range(args.mutants)]

        env = os.environ.copy()
        env["OMP_NUM_THREADS"] = "1"

        # baselines: every command on every unmodified (normalized) seed
        baselines = []
        if not args.only:
            for s in seeds:
                for c in args.commands:
                    out_json = os.path.join(base_dir, "%s.%s.json" % (s.stem, c))
                    argv_ = build_argv(args.ncert, c, s.run_path, s.run_path, out_json,
                                       args.memory_limit, args.hdf5_timeout)
                    rc, out, err = run_one(argv_, args.timeout, env)
                    outcome, flags, bad, ename = classify(rc, out, err, out_json)
                    baselines.append({"seed": s.name, "command": c, "outcome": outcome,
                                      "flags": flags, "bad": bad})

        lock = threading.Lock()
        progress = {"done": 0}
        total = len(tasks)
        step = max(1, total // 10)

        def work(task):
            si, k = task
            if _STOP.is_set():
                return task, None
            s = seeds[si]
            kind = args.kinds[k % len(args.kinds)]
            data, mutation = make_mutant(s, args.seed, k, kind)
            mid = "%s.%04d" % (s.stem, k)
            mfile = os.path.join(mutant_dir, "%s.%s.h5" % (mid, kind))
            with open(mfile, "wb") as f:
                f.write(data)
            runs = []
            for c in args.commands:
                out_json = os.path.join(report_dir, "%s.%s.json" % (mid, c))
                argv_ = build_argv(args.ncert, c, mfile, s.run_path, out_json,
                                   args.memory_limit, args.hdf5_timeout)
                rc, out, err = run_one(argv_, args.timeout, env)
                outcome, flags, bad, ename = classify(rc, out, err, out_json)
                run = {"command": c, "outcome": outcome, "flags": flags, "bad": bad,
                       "error_name": ename, "returncode": rc}
                if bad:
                    run["stderr_tail"] = tail_text(err, workdir)
                runs.append(run)
                if not args.keep:
                    try:
                        os.remove(out_json)
                    except FileNotFoundError:
                        pass
            rec = {"id": mid, "seed": s.name, "index": k, "mutation": mutation, "runs": runs}
            if any(r["bad"] for r in runs) and args.keep_failures:
                dst = os.path.join(args.keep_failures, "%s.%s.h5" % (mid, kind))
                shutil.copyfile(mfile, dst)
                write_repro(dst[:-3] + ".txt", os.path.basename(dst), rec, runs, args, s)
            if not args.keep:
                os.remove(mfile)
            with lock:
                progress["done"] += 1
                d = progress["done"]
                if not args.quiet and (d % step == 0 or d == total):
                    print("  %d/%d mutants (%.0f s)" % (d, total, time.monotonic() - t0),
                          file=sys.stderr, flush=True)
            return task, rec

        results = {}
        if not args.quiet:
            print("mutate.py: %d seed(s), %d mutant(s), commands %s, %d job(s), workdir %s"
                  % (len(seeds), total, " ".join(args.commands), args.jobs, workdir),
                  file=sys.stderr, flush=True)
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs)
        try:
            for task, rec in pool.map(work, tasks):
                results[task] = rec
        except KeyboardInterrupt:
            _STOP.set()
            kill_live()
            pool.shutdown(wait=True, cancel_futures=True)
            print("mutate.py: interrupted", file=sys.stderr)
            return 130
        pool.shutdown(wait=True)
        elapsed = time.monotonic() - t0

        tally = new_tally(args.commands)
        bad_list = []
        kinds_seen = []
        for task in sorted(results):
            rec = results[task]
            kind = rec["mutation"]["kind"]
            if kind not in kinds_seen:
                kinds_seen.append(kind)
            for r in rec["runs"]:
                add_to_tally(tally[r["command"]], kind, r["outcome"], r["flags"], r["bad"],
                             r["error_name"])
                if r["bad"]:
                    bad_list.append({
                        "mutant": rec["id"], "seed": rec["seed"], "index": rec["index"],
                        "mutation": rec["mutation"], "description": describe(rec["mutation"]),
                        "command": r["command"], "outcome": r["outcome"], "flags": r["flags"],
                        "returncode": r["returncode"], "stderr_tail": r.get("stderr_tail", ""),
                    })
        for c in args.commands:
            t = tally[c]
            t["outcomes"] = {k: t["outcomes"][k] for k in sorted(t["outcomes"],
                                                                  key=outcome_order)}
            t["flags"] = sort_dict(t["flags"])
            t["error_names"] = sort_dict(t["error_names"])
            t["by_kind"] = {k: t["by_kind"][k] for k in args.kinds if k in t["by_kind"]}
            for e in t["by_kind"].values():
                e["outcomes"] = {k: e["outcomes"][k] for k in sorted(e["outcomes"],
                                                                     key=outcome_order)}
        bad_baselines = [b for b in baselines if b["bad"]]
        n_bad = len(bad_list) + len(bad_baselines)

        # human output
        print("ncert mutation run: %d seed(s) x %s mutant(s), --seed %d, commands: %s" % (
            len(seeds), args.mutants if not args.only else "selected", args.seed,
            " ".join(args.commands)))
        print("seeds: " + " ".join(s.name for s in seeds))
        if baselines:
            odd = [b for b in baselines if b["outcome"] not in ("exit0", "exit1")]
            print("baseline (unmodified seeds): %d run(s), %d not exit 0/1%s" % (
                len(baselines), len(odd),
                "".join("\n  %s %s -> %s %s" % (b["command"], b["seed"], b["outcome"],
                                                 " ".join(b["flags"])) for b in odd)))
        print()
        print_table(tally, args.commands)
        print_kind_table(tally, args.commands, [k for k in args.kinds if k in kinds_seen])
        if bad_list:
            print("\nbad outcomes (%d):" % len(bad_list))
            for b in bad_list[:40]:
                print("  %-28s %-8s %-16s %s%s" % (
                    b["mutant"], b["command"], b["outcome"],
                    ("[" + ",".join(b["flags"]) + "] ") if b["flags"] else "",
                    b["description"]))
            if len(bad_list) > 40:
                print("  ... %d more (see --json)" % (len(bad_list) - 40))
        print("\n%s: %d bad run(s) of %d; %.1f s" % (
            "FAIL" if n_bad else "PASS", n_bad,
            sum(tally[c]["runs"] for c in args.commands) + len(baselines), elapsed))
        if args.keep_failures and n_bad:
            print("bad mutants copied to %s" % args.keep_failures)

        if args.json:
            doc = {
                "tool": "ncert-mutate",
                "version": 1,
                "arguments": {
                    "seed": args.seed, "mutants": args.mutants, "commands": args.commands,
                    "kinds": args.kinds, "timeout": args.timeout,
                    "hdf5_timeout": args.hdf5_timeout, "smoke": args.smoke,
                    "normalize": not args.no_normalize, "only": args.only,
                },
                "seeds": [{"name": s.name, "bytes": len(s.data), "sha256": s.sha256,
                           "mtimes_normalized": s.mtimes_fixed,
                           "object_headers_v1": s.map.ohdr_count,
                           "metadata_regions": len(s.map.regions)} for s in seeds],
                "baseline": baselines,
                "mutants": len(results),
                "bad_runs": n_bad,
                "tally": tally,
                "bad": bad_list,
            }
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(doc, f, indent=1)
                f.write("\n")
        return 1 if n_bad else 0
    finally:
        if own_workdir and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        elif not args.keep:
            for d in created:
                shutil.rmtree(d, ignore_errors=True)
        else:
            print("work directory kept: %s" % workdir, file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
