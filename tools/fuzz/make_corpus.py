#!/usr/bin/env python3
"""Writes the seed corpora of the libFuzzer targets (tools/fuzz/README.md).

OUT/dump/   every dump `ncert demo` writes up to --max-bytes (the two 8 MB logits dumps are
            left out: libFuzzer reads at most -max_len bytes of a seed, and a 40x larger input
            is 40x fewer executions), modification times fixed (as mutate.py does), so the
            corpus is the same bytes from one build to the next
OUT/chunk/  raw chunks for ncert_chunk_fuzzer, in its input layout (a 5-byte header, then the
            chunk as stored): deflate, shuffle + deflate, shuffle alone and deflate twice, of
            f32, bf16 and i64 data shaped like the demo dumps' chunks

Python 3 standard library only. Exit 0 on success, 2 when ncert cannot write the dumps.
"""

import argparse
import os
import random
import struct
import subprocess
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h5map import H5Map  # noqa: E402  (fixes modification times, as mutate.py does)

# ncert_chunk_fuzzer pipelines (byte 0, bits 0-1): the order of kPipelines in chunk_fuzzer.cc
PIPE_DEFLATE, PIPE_SHUFFLE_DEFLATE, PIPE_SHUFFLE, PIPE_DEFLATE_TWICE = range(4)


def shuffle(data, element_size):
    """HDF5's shuffle filter: byte j of every element stored together (trailing bytes kept)."""
    n = len(data) // element_size
    out = bytearray(len(data))
    for j in range(element_size):
        out[j * n:(j + 1) * n] = data[j:n * element_size:element_size]
    out[n * element_size:] = data[n * element_size:]
    return bytes(out)


def chunk_seed(pipeline, element_size, payload):
    stored = payload
    if pipeline in (PIPE_SHUFFLE, PIPE_SHUFFLE_DEFLATE):
        stored = shuffle(stored, element_size)
    if pipeline in (PIPE_DEFLATE, PIPE_SHUFFLE_DEFLATE, PIPE_DEFLATE_TWICE):
        stored = zlib.compress(stored, 4)
    if pipeline == PIPE_DEFLATE_TWICE:
        stored = zlib.compress(stored, 1)
    size = len(payload)
    assert size < 1 << 24
    return bytes([pipeline, element_size - 1, size & 0xFF, (size >> 8) & 0xFF,
                  (size >> 16) & 0xFF]) + stored


def chunk_payloads():
    r = random.Random("ncert-fuzz-corpus")
    # a logits-like f32 chunk (16 rows x 64), a bf16 activation chunk, i64 tokens
    f32 = struct.pack("<1024f", *[r.gauss(0.0, 4.0) for _ in range(1024)])
    bf16 = b"".join(struct.pack("<f", r.gauss(0.0, 1.0))[2:] for _ in range(2048))
    i64 = struct.pack("<256q", *[r.randrange(151936) for _ in range(256)])
    odd = bytes(r.randrange(256) for _ in range(1001))  # not a whole number of elements
    return [("f32", 4, f32), ("bf16", 2, bf16), ("i64", 8, i64), ("odd", 4, odd),
            ("zeros", 4, bytes(4096))]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ncert", required=True, help="the ncert binary that writes the demo dumps")
    p.add_argument("--out", required=True, help="corpus directory (dump/ and chunk/ below it)")
    p.add_argument("--max-bytes", type=int, default=1 << 20,
                   help="leave out dumps larger than this (default 1 MiB)")
    a = p.parse_args()

    dump_dir = os.path.join(a.out, "dump")
    chunk_dir = os.path.join(a.out, "chunk")
    os.makedirs(dump_dir, exist_ok=True)
    os.makedirs(chunk_dir, exist_ok=True)

    with tempfile.TemporaryDirectory(prefix="ncert-corpus-") as tmp:
        demo = os.path.join(tmp, "demo")
        # In-process: the demo reads only the dumps it writes, and a sanitized ncert (the fuzz
        # preset's) cannot run isolated, as the child's address-space cap leaves no room for
        # AddressSanitizer's shadow memory ("ERROR: Failed to mmap").
        env = dict(os.environ, NCERT_ISOLATION="off")
        proc = subprocess.run([a.ncert, "demo", "--dir", demo, "--force", "--quiet"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, env=env)
        names = sorted(n for n in os.listdir(demo) if n.endswith(".h5")) \
            if os.path.isdir(demo) else []
        if not names:
            sys.stderr.write("make_corpus.py: `ncert demo` wrote no dump (exit %d): %s\n" % (
                proc.returncode, proc.stderr.decode("utf-8", "replace")[-400:]))
            return 2
        kept = 0
        for n in names:
            if os.path.getsize(os.path.join(demo, n)) > a.max_bytes:
                continue
            kept += 1
            raw = bytearray(open(os.path.join(demo, n), "rb").read())
            H5Map(bytes(raw)).normalize(raw)
            with open(os.path.join(dump_dir, n), "wb") as f:
                f.write(raw)
    for label, esize, payload in chunk_payloads():
        for pipe in range(4):
            with open(os.path.join(chunk_dir, "%s-p%d.bin" % (label, pipe)), "wb") as f:
                f.write(chunk_seed(pipe, esize, payload))
    print("make_corpus.py: %d dumps in %s, %d chunks in %s" % (
        kept, dump_dir, len(os.listdir(chunk_dir)), chunk_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
