"""Hand-made hostile inputs, one regression test each, and the report-output safety rules.

Every file is made here, from `ncert demo`'s dumps edited with h5py, python/ncert_dump or byte
surgery: a 10,000-deep group chain, names that try to forge report lines or drive the
terminal, invalid UTF-8, an embedded NUL in a fixed-length string, a dump declaring a 4 GiB
activation, unallocated datasets declaring 2^40 elements and 2^38-wide logits, corrupt deflate
and fletcher32 chunks met in the middle of a run. Then the rules of docs/cli.md "Reports and
exit status": an output that is an input, an unwritable or missing directory, a full disk,
/dev/null, a symbolic link, and SIGINT/SIGTERM in the middle of a long `check`.
"""
import hashlib
import os
import re
import shutil
import signal
import stat
import struct
import subprocess
import time
import unittest
import zlib

import h5py
import numpy as np

import hostile_support as hs
from ncert_dump import DumpWriter, Segment

# HDF5 API function names (H5Dread, H5Z_pipeline, H5HG_read...) in a message
HDF5_FUNCTION = re.compile(r"\bH5[A-Z][A-Za-z0-9]*_?[A-Za-z0-9_]*")
FORGED_NAME = "a\nPASS  schema  fake\x1b[2J"
FORGED_VALUE = "v\nPASS  forged\x1b[31m"


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def json_strings(node):
    """Every string (keys included) in a parsed JSON document."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for k, v in node.items():
            yield k
            yield from json_strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from json_strings(v)


def replace_with_zero_chunks(group, name, shape, chunk):
    """Replaces dataset `name` by a deflated chunked one of `shape`, every chunk written as the
    same compressed block of zeros: the file stores every chunk (no unallocated space) in about
    1/1000 of the declared size."""
    old = group[name]
    attrs = dict(old.attrs)
    dtype = old.dtype
    del group[name]
    d = group.create_dataset(name, shape=shape, chunks=chunk, dtype=dtype, compression="gzip",
                             compression_opts=9)
    for k, v in attrs.items():
        d.attrs[k] = v
    block = zlib.compress(bytes(int(np.prod(chunk)) * dtype.itemsize), 9)
    for r in range(0, shape[0], chunk[0]):
        d.id.write_direct_chunk((r,) + (0,) * (len(shape) - 1), block)


class HostileInputs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = hs.scratch("inputs")
        if hs.NCERT:
            cls.demo = hs.demo_dumps(os.path.join(cls.dir, "demo"))

    def setUp(self):
        hs.require_binary(self)

    def path(self, name):
        return os.path.join(self.dir, name)

    def copy_good(self, name):
        p = self.path(name)
        shutil.copyfile(self.demo["good.h5"], p)
        return p

    def small_logits_dump(self, name, vocab=64, rows=2):
        rng = np.random.default_rng(11)
        logits = rng.standard_normal((rows, vocab)).astype(np.float32)
        p = self.path(name)
        with DumpWriter(p, engine="hostile", build=name, overwrite=True) as dw:
            dw.add_logits_run("greedy", tokens=logits.argmax(axis=1).astype(np.int32),
                              logits=logits)
        return p

    def assert_refused(self, r, code, name, report=None):
        self.assertFalse(r.hung, r.describe())
        self.assertEqual(r.returncode, 3, r.describe())
        refused = r.refused()
        self.assertIsNotNone(refused, "no REFUSED line\n" + r.describe())
        self.assertEqual(refused[:2], (name, code), r.describe())
        if report:
            doc = hs.load_report(report)
            self.assertEqual((doc["error"]["name"], doc["error"]["code"]), (name, code), doc)
        return refused[2]

    # ---------------------------------------------------------------- trees and names

    def test_a_path_longer_than_1024_bytes_is_a_tree_limit(self):
        # Every path below a group repeats its name: 12,000 children of a group named with
        # 60,000 characters (a 9.9 MB file) took 3.5 GB, and inspect printed 720 MB (a review's).
        p = self.copy_good("long_path.h5")
        with h5py.File(p, "r+") as f:
            g = f.create_group("extra/" + "n" * 60000)
            for i in range(2000):
                g.create_group("c%d" % i)
        for command in ("inspect", "check"):
            with self.subTest(command=command):
                r = hs.run_measured([command, p], timeout=120)
                message = self.assert_refused(r, 217, "tree-limit")
                self.assertIn("a path of 60007 bytes, over the 1024 an object's path may have", message)
                self.assertLess(len(r.out), 10000)
                self.assertLess(r.maxrss_kib, 256 << 10)

    def test_deep_group_chain_is_a_tree_limit(self):
        p = self.copy_good("deep.h5")
        with h5py.File(p, "r+") as f:
            g = f.create_group("chain")
            for _ in range(10000):
                g = g.create_group("g")
        for command in ("inspect", "check"):
            with self.subTest(command=command):
                report = self.path("deep.%s.json" % command)
                r = hs.run([command, p, "--json", report], timeout=120)
                message = self.assert_refused(r, 217, "tree-limit", report)
                self.assertIn("/chain/g/g/g", message)
                self.assertIn("deep.h5: /", message)

    def alias_strings(self, path, big, small_len, count):
        """Points the `count` variable-length strings of length `small_len` in the file at the
        heap object of the one string of length `big`: a file of about `big` bytes whose
        strings, read, hold count x big bytes (each descriptor: length, heap address, index)."""
        with open(path, "rb") as f:
            data = bytearray(f.read())

        def descriptor(i):  # a heap address pointing at a global heap collection
            heap = struct.unpack_from("<Q", data, i + 4)[0]
            return 0 < heap < len(data) - 4 and data[heap:heap + 4] == b"GCOL"

        at = data.find(struct.pack("<I", big))
        while at >= 0 and not descriptor(at):
            at = data.find(struct.pack("<I", big), at + 1)
        self.assertGreaterEqual(at, 0)
        target = bytes(data[at:at + 16])
        patched = 0
        i = data.find(struct.pack("<I", small_len))
        while i >= 0:
            if descriptor(i):
                data[i:i + 16] = target
                patched += 1
            i = data.find(struct.pack("<I", small_len), i + 4)
        self.assertEqual(patched, count)
        with open(path, "wb") as f:
            f.write(data)

    def test_strings_sharing_one_heap_object_are_not_read_again_and_again(self):
        # A review's 1.3 MB file whose 2,048 strings point at one 1 MiB heap object read 2 GiB
        # (2.1 GB peak) for an attribute nothing reads; 64 such attributes took 149 s.
        big = 1 << 20
        p = self.copy_good("shared_strings.h5")
        with h5py.File(p, "r+") as f:
            values = np.array(["B" * big] + ["x" * 37] * 2047, dtype=object)
            f.create_group("extra").attrs.create("strings", values, dtype=h5py.string_dtype())
        self.alias_strings(p, big, 37, 2047)
        r = hs.run_measured(["inspect", p, "--json", self.path("shared_strings.json")], timeout=120)
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertLess(r.maxrss_kib, 512 * 1024, r.describe())
        with open(self.path("shared_strings.json")) as f:
            self.assertIn("variable-length strings, 2048 of them (not read)", f.read())
        # Scalars are read (the format's strings are scalars): 200 of them sharing the 1 MiB
        # object exceed the attributes' budget (64 MiB, or twice the file) and are refused.
        p = self.copy_good("shared_scalars.h5")
        with h5py.File(p, "r+") as f:
            g = f.create_group("extra")
            g.attrs.create("big", "B" * big, dtype=h5py.string_dtype())
            for i in range(200):
                g.attrs.create("s%03d" % i, "y" * 41, dtype=h5py.string_dtype())
        self.alias_strings(p, big, 41, 200)
        for command in ("inspect", "check"):
            with self.subTest(command=command):
                r = hs.run_measured([command, p], timeout=120)
                message = self.assert_refused(r, 218, "storage-bomb")
                self.assertIn("/extra", message)
                self.assertIn("more than the 67108864 bytes", message)
                self.assertLess(r.maxrss_kib, 512 * 1024, r.describe())

    def test_compact_storage_shorter_than_its_shape_is_refused_before_reading(self):
        # Compact raw data lives in the layout message, whose size field HDF5 trusts: one
        # declaring 512 bytes for [8, 64] f32 was read past its buffer, and heap memory came back
        # as logits (different on every run; a review's).
        p = self.copy_good("compact.h5")
        with h5py.File(p, "r+") as f:
            run = f["logits/greedy"]
            values = run["logits"][...]
            self.assertLess(values.size * 4, 60000, values.shape)  # compact holds < 64 KiB
            del run["logits"]
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            dcpl.set_layout(h5py.h5d.COMPACT)
            d = h5py.h5d.create(run.id, b"logits", h5py.h5t.IEEE_F32LE, h5py.h5s.create_simple(values.shape),
                                dcpl=dcpl)
            d.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(values, np.float32))
        r = hs.run(["witness", p])
        self.assertEqual(r.returncode, 0, r.describe())  # compact storage is fine
        with open(p, "rb") as f:
            data = bytearray(f.read())
        raw = np.ascontiguousarray(values, np.float32).tobytes()
        at = data.find(struct.pack("<H", len(raw)) + raw)
        self.assertGreater(at, 0)
        data[at:at + 2] = struct.pack("<H", len(raw) // 4)
        with open(p, "wb") as f:
            f.write(data)
        for command in ("inspect", "witness"):
            with self.subTest(command=command):
                message = self.assert_refused(hs.run([command, p]), 202, "hdf5")
                self.assertIn("/logits/greedy/logits: compact storage of %d bytes where its shape" % (len(raw) // 4),
                              message)

    def test_a_file_its_writer_still_has_open_is_named_so_not_corrupt(self):
        # A superblock v3 file whose writer has it open (SWMR) or never closed it: libhdf5
        # refuses it, and the reason read "corrupt or truncated" (a review's).
        p = self.path("open-for-write.h5")
        with h5py.File(p, "w", libver="latest") as f:
            f.create_dataset("d", data=np.zeros(4, np.float32))
            f.swmr_mode = True
            r = hs.run(["inspect", p])
        message = self.assert_refused(r, 202, "hdf5")
        self.assertIn("a writer has it open, or did not close it", message)
        self.assertNotIn("corrupt", message)

    def narrow_rows(self, path, projection, out_stride):
        """Stores every output (and the residual) of `projection` out_stride wide, as its
        attribute then says: a layout the reader passes to the geometry guard (306)."""
        with h5py.File(path, "r+") as f:
            p = f["projections/" + projection]
            p.attrs["out_stride"] = np.int64(out_stride)
            for d in [d for d in p if d.startswith("y_") or d == "residual"]:
                data, attrs = p[d][...][:, :out_stride], dict(p[d].attrs)
                del p[d]
                nd = p.create_dataset(d, data=data)
                for a, v in attrs.items():
                    nd.attrs[a] = v

    def test_output_rows_narrower_than_n_fail_geometry_and_are_not_read(self):
        # Every check after geometry read N values a row: past the stored arrays (a heap
        # over-read under ASan). They are now not evaluated, and an lm_head that narrow gives
        # its run no intervals.
        p = self.copy_good("narrow.h5")
        self.narrow_rows(p, "mlp_down", 24)
        self.narrow_rows(p, "lm_head_greedy", 200)
        report = self.path("narrow.json")
        r = hs.run(["check", p, "--json", report], timeout=120)
        self.assertEqual(r.returncode, 1, r.describe())
        by_id = {c["id"]: c for c in hs.load_report(report)["checks"]}
        geometry = by_id["projections/mlp_down/geometry"]
        self.assertEqual(geometry["verdict"], "FAIL")
        self.assertIn("guard-stride-below-width", geometry["reason"])
        for kind in ("identity", "bound", "untouched"):
            c = by_id["projections/mlp_down/" + kind]
            self.assertEqual(c["verdict"], "FAIL", c)
            self.assertIn("not evaluated: guard-stride-below-width: output stride 24 < valid width", c["reason"])
        witness = by_id["logits/greedy/witness"]
        self.assertIn("lm_head lm_head_greedy cannot be read", witness["stats"]["error_source"])
        r = hs.run(["witness", p], timeout=120)
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertIn("output stride 200 < valid width 256", r.text)

    def test_a_schema_refusal_names_file_object_and_value_in_every_command(self):
        # inspect listed the file above its refusal, but the refusal itself (the line a log
        # keeps, the JSON error) named only the object.
        p = self.copy_good("acc.h5")
        with h5py.File(p, "r+") as f:
            f["projections/attn_qkv"].attrs["accumulator"] = "f64"
        for command in ("inspect", "check"):
            with self.subTest(command=command):
                report = self.path("acc.%s.json" % command)
                r = hs.run([command, p, "--json", report], timeout=120)
                message = self.assert_refused(r, 405, "accumulator-unknown", report)
                self.assertIn("acc.h5: /projections/attn_qkv: accumulator \"f64\"", message)
                self.assertEqual(hs.load_report(report)["error"]["message"], message)

    def test_names_cannot_forge_report_lines_or_drive_the_terminal(self):
        p = self.copy_good("forged.h5")
        with h5py.File(p, "r+") as f:
            f.attrs[FORGED_NAME] = FORGED_VALUE
            f.create_dataset(FORGED_NAME, data=np.zeros(3, np.float32))
            f["projections/attn_qkv"].attrs[FORGED_NAME] = 1
        for command in ("inspect", "check"):
            with self.subTest(command=command):
                report = self.path("forged.%s.json" % command)
                r = hs.run([command, p, "--json", report, "--verbose"], timeout=120)
                self.assertIn(r.returncode, (0, 1, 3), r.describe())
                for stream in (r.out, r.err):
                    self.assertNotIn(b"\x1b", stream)
                    for line in stream.decode("utf-8", "strict").splitlines():
                        self.assertFalse(line.startswith(("PASS  schema  fake", "PASS  forged")),
                                         "forged line: %r" % line)
                doc = hs.load_report(report)
                if command == "inspect":
                    # printed escaped, reported exactly
                    self.assertIn("a\\nPASS  schema  fake\\x1b[2J", r.text)
                    self.assertIn(FORGED_NAME, "\n".join(json_strings(doc)))

    def test_invalid_utf8_in_names_and_strings(self):
        p = self.copy_good("badutf8.h5")
        with h5py.File(p, "r+") as f:
            f.attrs[b"bad\xff\xfename"] = np.bytes_(b"x\xc3\x28y")
            f.attrs.modify("engine", np.bytes_(b"eng\xff\xfe"))  # fixed-length, not UTF-8
            f.create_dataset(b"member\xe2\x82", data=np.zeros(2, np.float32))
            f["projections/attn_qkv"].attrs.create("note", b"v\xff\xfe", dtype=h5py.string_dtype("ascii"))
            f["projections"].create_group(b"p\xff")
        for command in ("inspect", "check", "witness"):
            with self.subTest(command=command):
                report = self.path("badutf8.%s.json" % command)
                r = hs.run([command, p, "--json", report], timeout=120)
                self.assertFalse(r.hung, r.describe())
                self.assertIn(r.returncode, (0, 1, 3), r.describe())
                r.out.decode("utf-8", "strict")
                r.err.decode("utf-8", "strict")
                doc = hs.load_report(report)  # strict UTF-8
                if r.returncode == 3:
                    self.assertIn("error", doc)

    def test_embedded_nul_in_a_fixed_length_string_is_refused(self):
        p = self.copy_good("nul.h5")
        with h5py.File(p, "r+") as f:
            g = f["projections/attn_qkv"]
            del g.attrs["op"]
            g.attrs.create("op", np.bytes_(b"linear\x00evil"))  # 11-byte fixed-length string
        for command in ("inspect", "check"):
            with self.subTest(command=command):
                report = self.path("nul.%s.json" % command)
                r = hs.run([command, p, "--json", report])
                message = self.assert_refused(r, 222, "attribute-invalid", report)
                self.assertIn("/projections/attn_qkv", message)
                self.assertRegex(message, r"\bop\b")

    def test_an_oversized_dtype_tag_is_named_as_oversized_not_as_missing(self):
        # A 2 MiB variable-length dtype on raw bf16 biases: refused as the oversized attribute
        # it is (222, with its size), not as a uint16 dataset without the tag (220).
        p = self.copy_good("dtype-oversized.h5")
        with h5py.File(p, "r+") as f:
            d = f["projections/attn_qkv/weight/s0_af4/biases"]
            del d.attrs["dtype"]
            d.attrs.create("dtype", "bf16" + "x" * (2 * 1024 * 1024 - 4), dtype=h5py.string_dtype())
        for command in ("inspect", "check"):
            with self.subTest(command=command):
                report = self.path("dtype-oversized.%s.json" % command)
                r = hs.run([command, p, "--json", report])
                message = self.assert_refused(r, 222, "attribute-invalid", report)
                self.assertIn("s0_af4/biases", message)
                self.assertIn("oversized", message)

    # ---------------------------------------------------------------- memory and storage bombs

    def test_declared_4gib_activation_is_a_memory_limit_without_allocating_it(self):
        # A consistent projection (x [M, K], W [N, K], y_unpacked [M, N], selector [4]) whose x
        # declares 2^19 x 4096 bf16 = 4 GiB, every chunk stored as deflated zeros (~4 MB file):
        # nothing is a storage bomb, and certifying it would need ~55 GiB.
        rng = np.random.default_rng(2)
        m, k, n = 4, 4096, 8
        p = self.path("big_x.h5")
        x = (rng.integers(0x3c00, 0x3f80, (m, k))).astype(np.uint16)
        w = (rng.integers(0x3c00, 0x3f80, (n, k))).astype(np.uint16)
        with DumpWriter(p, engine="hostile", build="big-x", overwrite=True) as dw:
            dw.add_projection("p", x=x, x_dtype="bf16", weights=[Segment("bf16", 0, n, values=w)],
                              accumulator="f32-rn", output_dtype="bf16",
                              selector=np.arange(m, dtype=np.int32),
                              y_unpacked=np.zeros((m, n), np.uint16))
        rows = 1 << 19
        with h5py.File(p, "r+") as f:
            g = f["projections/p"]
            replace_with_zero_chunks(g, "x", (rows, k), (256, k))
            replace_with_zero_chunks(g, "y_unpacked", (rows, n), (1 << 16, n))
        self.assertLess(os.path.getsize(p), 8 << 20)
        report = self.path("big_x.json")
        t0 = time.monotonic()
        r = hs.run_measured(["check", p, "--json", report, "--threads", "1"], timeout=120)
        elapsed = time.monotonic() - t0
        message = self.assert_refused(r, 226, "memory-limit", report)
        m_need = re.search(r"needs about [0-9.]+ GiB \((\d+) bytes", message)
        self.assertIsNotNone(m_need, message)
        self.assertGreater(int(m_need.group(1)), 8 << 30)
        self.assertIn("/projections/p", message)
        self.assertLess(r.maxrss_kib, 256 << 10, "peak RSS %d KiB" % r.maxrss_kib)
        self.assertLess(elapsed, 30)

    def test_a_chunk_too_large_for_the_budget_names_the_file(self):
        # A tensor, 32,767 x 32,768 f32, stored as one deflate chunk (4 GiB of zeros in ~4 MB; as
        # large as the tensor, so no chunk bomb): libhdf5 would inflate it whole to read any row,
        # over --max-memory 64 MiB. It is refused before libhdf5 is asked (whose failed
        # allocation the logits' chunk of this size reached before chunks larger than their
        # dataset were chunk bombs). compare reads two dumps with the same object names, so the
        # message names the file, and the budget as the cause before any corruption.
        a = self.small_logits_dump("bigchunk-a.h5")
        b = self.small_logits_dump("bigchunk-b.h5")
        rows, cols = 32767, 32768
        # A zlib stream of rows x cols x 4 zero bytes without deflating 4 GiB: after a full flush
        # the compressor starts afresh, so every further 16 MiB block of zeros deflates to the
        # same bytes; then an empty final block and the Adler-32 of n zeros, (n mod 65521) << 16 | 1.
        block = bytes(16 << 20)
        z = zlib.compressobj(9)
        head = z.compress(block) + z.flush(zlib.Z_FULL_FLUSH)
        repeat = z.compress(block) + z.flush(zlib.Z_FULL_FLUSH)
        total = rows * cols * 4
        whole, tail = divmod(total - len(block), len(block))
        tail_bytes = z.compress(bytes(tail)) + z.flush(zlib.Z_FULL_FLUSH) if tail else b""
        stream = head + repeat * whole + tail_bytes + b"\x03\x00" + ((total % 65521) << 16 | 1).to_bytes(4, "big")
        for path in (a, b):
            with h5py.File(path, "r+") as f:
                d = f.create_group("tensors").create_dataset("big", shape=(rows, cols), chunks=(rows, cols),
                                                             dtype=np.float32, compression="gzip")
                d.id.write_direct_chunk((0, 0), stream)
        self.assertLess(os.path.getsize(b), 16 << 20)
        report = self.path("bigchunk.json")
        r = hs.run(["compare", a, b, "--max-memory", str(64 << 20), "--json", report], timeout=120)
        message = self.assert_refused(r, 226, "memory-limit", report)
        self.assertTrue(message.startswith(a + ": /tensors/big: its blocks of 32767 rows take 4294836224 bytes at "
                                           "once, over the memory limit of 67108864"), message)
        self.assertNotIn("corrupt", message)

    def test_unallocated_2_40_elements_are_a_storage_bomb(self):
        p = self.small_logits_dump("bomb40.h5")
        with h5py.File(p, "r+") as f:
            f.create_group("tensors").create_dataset(
                "bomb", shape=(1 << 20, 1 << 20), chunks=(1024, 1024), dtype=np.float32)
        for command in ("inspect", "check"):
            with self.subTest(command=command):
                report = self.path("bomb40.%s.json" % command)
                t0 = time.monotonic()
                r = hs.run_measured([command, p, "--json", report], timeout=120)
                message = self.assert_refused(r, 218, "storage-bomb", report)
                self.assertIn("/tensors/bomb", message)
                self.assertLess(time.monotonic() - t0, 10)
                self.assertLess(r.maxrss_kib, 256 << 10)

    def rechunk_logits(self, name, chunk_width):
        """The good dump with its logits deflated in chunks of all rows by `chunk_width`
        columns; the path and the logits' shape."""
        p = self.copy_good(name)
        with h5py.File(p, "r+") as f:
            run = f["logits/greedy"]
            values, attrs = run["logits"][...], dict(run["logits"].attrs)
            del run["logits"]
            d = run.create_dataset("logits", data=values, maxshape=(None, None), chunks=(values.shape[0], chunk_width),
                                   compression="gzip", compression_opts=9)
            for k, v in attrs.items():
                d.attrs[k] = v
        return p, values.shape

    def test_a_chunk_far_wider_than_its_dataset_is_a_chunk_bomb(self):
        # [6, 256] logits in deflated chunks of [6, 2^26] passed the storage bound (it counts the
        # declared bytes), and every command read and inflated 1.5 GiB per chunk (a review's).
        p, _ = self.rechunk_logits("wide_chunk.h5", 1 << 26)
        for command in ("inspect", "witness"):
            with self.subTest(command=command):
                r = hs.run_measured([command, p], timeout=120)
                message = self.assert_refused(r, 234, "chunk-bomb")
                self.assertIn("/logits/greedy/logits", message)
                self.assertIn("a chunk larger than the dataset may be at most 268435456 bytes", message)
                self.assertLess(r.maxrss_kib, 256 << 10)
        # Under 256 MiB, a chunk still inflates whole: over --max-memory it is refused naming it.
        p, shape = self.rechunk_logits("wide_chunk_budget.h5", 1 << 23)
        r = hs.run_measured(["witness", p, "--max-memory", str(64 << 20)], timeout=120)
        message = self.assert_refused(r, 226, "memory-limit")
        self.assertIn("/logits/greedy/logits: its chunks of %d bytes are inflated whole, over the memory limit of %d"
                      % (shape[0] * (1 << 23) * 4, 64 << 20), message)
        self.assertLess(r.maxrss_kib, 256 << 10)

    def test_logits_2_38_wide_are_refused_not_an_internal_error(self):
        p = self.small_logits_dump("wide38.h5")
        other = self.small_logits_dump("wide38-other.h5")
        with h5py.File(p, "r+") as f:
            g = f["logits/greedy"]
            del g["logits"]
            g.create_dataset("logits", shape=(2, 1 << 38), chunks=(1, 1 << 16), dtype=np.float32)
            g.attrs["vocab"] = np.int64(1 << 38)
        for args in (["inspect", p], ["check", p], ["witness", p], ["compare", p, other]):
            with self.subTest(command=args[0]):
                report = self.path("wide38.%s.json" % args[0])
                r = hs.run_measured(args + ["--json", report], timeout=120)
                self.assertFalse(r.hung, r.describe())
                self.assertEqual(r.returncode, 3, r.describe())
                self.assertIsNotNone(r.refused(), r.describe())
                self.assertIn("error", hs.load_report(report))
                self.assertLess(r.maxrss_kib, 256 << 10)

    # ---------------------------------------------------------------- corrupt data mid-run

    def corrupt_chunk_pair(self, name, **filters):
        """Two dumps with the same chunked logits [64, 4096] (chunks of 4 rows); in the first,
        16 bytes in the middle of the chunk holding rows 40-43 are flipped."""
        rng = np.random.default_rng(3)
        logits = rng.standard_normal((64, 4096)).astype(np.float32)
        paths = []
        for suffix in ("a", "b"):
            p = self.path("%s-%s.h5" % (name, suffix))
            with DumpWriter(p, engine="hostile", build=name + suffix, overwrite=True) as dw:
                dw.add_logits_run("greedy", tokens=logits.argmax(axis=1).astype(np.int32),
                                  logits=logits)
            with h5py.File(p, "r+") as f:
                g = f["logits/greedy"]
                del g["logits"]
                g.create_dataset("logits", data=logits, chunks=(4, 4096), **filters)
            paths.append(p)
        with h5py.File(paths[0], "r") as f:
            info = f["logits/greedy/logits"].id.get_chunk_info_by_coord((40, 0))
        with open(paths[0], "r+b") as f:
            f.seek(info.byte_offset + info.size // 2)
            b = bytearray(f.read(16))
            f.seek(info.byte_offset + info.size // 2)
            f.write(bytes(v ^ 0x5A for v in b))
        return paths

    def check_corrupt_chunk_refusal(self, a, b, tag):
        report = self.path(tag + ".json")
        r = hs.run(["compare", a, b, "--json", report], timeout=120)
        self.assertFalse(r.hung, r.describe())
        self.assertEqual(r.returncode, 3, r.describe())
        refused = r.refused()
        self.assertIsNotNone(refused, r.describe())
        message = refused[2]
        doc = hs.load_report(report)
        self.assertIn("error", doc)
        self.assertEqual(doc["error"]["message"], message)
        self.assertIn("/logits/greedy/logits", message)
        # the rows that could not be read, as a range holding the damaged rows 40-43
        rows = re.search(r"rows \[(\d+), (\d+)\)", message)
        self.assertIsNotNone(rows, "the message names no rows: " + message)
        self.assertTrue(int(rows.group(1)) <= 40 and int(rows.group(2)) >= 44, message)
        self.assertIsNone(HDF5_FUNCTION.search(message), "HDF5 function chain in: " + message)
        return r

    def test_corrupt_deflate_chunk_mid_compare(self):
        a, b = self.corrupt_chunk_pair("deflate", compression="gzip", compression_opts=4,
                                       shuffle=True)
        self.check_corrupt_chunk_refusal(a, b, "deflate")

    def test_fletcher32_mismatch_mid_compare(self):
        a, b = self.corrupt_chunk_pair("fletcher", fletcher32=True)
        self.check_corrupt_chunk_refusal(a, b, "fletcher")
        # the library's own account is there for whoever asks for it
        r = hs.run(["compare", a, b, "--verbose"], timeout=120)
        self.assertEqual(r.returncode, 3, r.describe())
        self.assertRegex(r.err_text, HDF5_FUNCTION, "--verbose shows no HDF5 error chain:\n" +
                         r.err_text)

    # ---------------------------------------------------------------- where reports go

    def test_report_over_the_input_is_a_usage_error_and_the_dump_is_untouched(self):
        d = self.path("same")
        os.makedirs(d)
        p = os.path.join(d, "dump.h5")
        shutil.copyfile(self.demo["good.h5"], p)
        os.symlink("dump.h5", os.path.join(d, "link.h5"))
        os.link(p, os.path.join(d, "hard.h5"))
        before = sha256(p)
        for target in (p, "./dump.h5", "link.h5", "hard.h5", "sub/../dump.h5"):
            with self.subTest(json=target):
                os.makedirs(os.path.join(d, "sub"), exist_ok=True)
                r = hs.run(["check", p, "--json", target], cwd=d)
                self.assertEqual(r.returncode, 2, r.describe())
                self.assertEqual(sha256(p), before)
                self.assertTrue(os.path.islink(os.path.join(d, "link.h5")))
                self.assertEqual(hs.temp_leftovers(d), [])

    def test_report_to_a_full_disk(self):
        with open("/dev/full", "wb") as full:
            r = hs.run(["check", self.demo["good.h5"], "--json", "-"], stdout=full)
            self.assertEqual(r.returncode, 5, r.describe())  # a PASS whose report was lost
            self.assertIn("report-write", r.err_text)
            r = hs.run(["check", self.demo["nan-output.h5"], "--json", "-"], stdout=full)
            self.assertEqual(r.returncode, 1, r.describe())  # a FAIL stays a FAIL

    def test_report_into_a_missing_or_unwritable_directory_fails_before_any_work(self):
        missing = self.path("no-such-dir/r.json")
        r = hs.run(["check", self.demo["good.h5"], "--json", missing])
        self.assertEqual(r.returncode, 2, r.describe())
        self.assertNotRegex(r.text, r"(?m)^(PASS|FAIL|SKIP)  ", "checks ran:\n" + r.text)
        self.assertFalse(os.path.exists(os.path.dirname(missing)))

        ro = self.path("read-only")
        os.makedirs(ro)
        dump = os.path.join(ro, "dump.h5")
        shutil.copyfile(self.demo["good.h5"], dump)
        os.chmod(dump, 0o644)
        os.chmod(ro, 0o555)
        drop = None
        if os.geteuid() == 0:
            # root writes anywhere: run as nobody, for whom the directory is read-only
            for d in (self.dir, ro):
                os.chmod(d, os.stat(d).st_mode | 0o055)

            def drop():
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
        try:
            r = hs.run(["check", dump, "--json", os.path.join(ro, "r.json")], preexec=drop)
        finally:
            os.chmod(ro, 0o755)
        self.assertEqual(r.returncode, 2, r.describe())
        self.assertNotRegex(r.text, r"(?m)^(PASS|FAIL|SKIP)  ", "checks ran:\n" + r.text)
        self.assertEqual(sorted(os.listdir(ro)), ["dump.h5"])

    def test_report_to_dev_null(self):
        r = hs.run(["check", self.demo["good.h5"], "--json", "/dev/null"])
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertTrue(stat.S_ISCHR(os.stat("/dev/null").st_mode))

    def test_report_through_a_symlink_replaces_the_target(self):
        d = self.path("symlinked")
        os.makedirs(d)
        target = os.path.join(d, "target.json")
        link = os.path.join(d, "link.json")
        # Behind the link a file that is not a report is kept (output-exists, 102), as any
        # other is (docs/cli.md "Reports and exit status"); an earlier report is replaced.
        with open(target, "w") as f:
            f.write("old\n")
        os.symlink("target.json", link)
        r = hs.run(["check", self.demo["good.h5"], "--json", link])
        self.assertEqual(r.returncode, 2, r.describe())
        self.assertIn("ncert: error output-exists (102): --json %s exists and is not a report" % link, r.err_text)
        with open(target) as f:
            self.assertEqual(f.read(), "old\n")
        with open(target, "w") as f:
            f.write('{\n  "tool": "ncert",\n  "command": "witness"\n}\n')
        r = hs.run(["check", self.demo["good.h5"], "--json", link])
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertTrue(os.path.islink(link))
        self.assertEqual(os.readlink(link), "target.json")
        self.assertEqual(hs.load_report(target)["command"], "check")
        self.assertEqual(hs.temp_leftovers(d), [])
        # A link to a file not there yet: the report is written where it points, the link kept
        # (it was replaced by a regular file, its target never written: a review's); into a
        # missing directory, or a link that loops, is a usage error.
        os.symlink("new.json", os.path.join(d, "dangling.json"))
        r = hs.run(["check", self.demo["good.h5"], "--json", os.path.join(d, "dangling.json")])
        self.assertEqual(r.returncode, 0, r.describe())
        self.assertTrue(os.path.islink(os.path.join(d, "dangling.json")))
        self.assertEqual(hs.load_report(os.path.join(d, "new.json"))["command"], "check")
        os.symlink("/nonexistent/dir/r.json", os.path.join(d, "nowhere.json"))
        os.symlink("loop.json", os.path.join(d, "loop.json"))
        for name, said in (("nowhere.json", "the directory /nonexistent/dir does not exist"),
                           ("loop.json", "is a symbolic link that loops")):
            r = hs.run(["check", self.demo["good.h5"], "--json", os.path.join(d, name)])
            self.assertEqual(r.returncode, 2, r.describe())
            self.assertIn(said, r.err_text)
            self.assertTrue(os.path.islink(os.path.join(d, name)))
        # Two outputs through a dangling link and its target are one path.
        os.symlink("both.html", os.path.join(d, "to-both.json"))
        r = hs.run(["check", self.demo["good.h5"], "--json", os.path.join(d, "to-both.json"),
                    "--html", os.path.join(d, "both.html")])
        self.assertEqual(r.returncode, 2, r.describe())
        self.assertIn("path-conflict (105)", r.err_text)
        self.assertEqual(hs.temp_leftovers(d), [])

    def test_sigint_and_sigterm_during_a_long_check(self):
        # 2048 x 4096 activations against 4096 x 4096 bf16 weights: ~2.5 s of `check` on one
        # thread on the reference machine. Its outputs are zeros, so it fails: it runs to the end.
        p = self.path("long.h5")
        m, k, n = 2048, 4096, 4096
        with DumpWriter(p, engine="hostile", build="long", overwrite=True) as dw:
            dw.add_projection("p", x=np.full((m, k), 0x3F80, np.uint16), x_dtype="bf16",
                              weights=[Segment("bf16", 0, n, values=np.full((n, k), 0x3C00, np.uint16))],
                              accumulator="f32-rn", output_dtype="bf16",
                              selector=np.arange(m, dtype=np.int32),
                              y_unpacked=np.zeros((m, n), np.uint16))
        try:
            for sig in (signal.SIGINT, signal.SIGTERM):
                with self.subTest(signal=sig.name):
                    d = self.path("signal-" + sig.name)
                    os.makedirs(d)
                    report = os.path.join(d, "r.json")
                    proc = subprocess.Popen([hs.NCERT, "check", p, "--threads", "1", "--json",
                                             report], stdin=subprocess.DEVNULL,
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                    time.sleep(0.7)
                    self.assertIsNone(proc.poll(), "check ended before the signal")
                    proc.send_signal(sig)
                    out, err = proc.communicate(timeout=60)
                    self.assertIn(proc.returncode, (-sig, 128 + sig),
                                  err.decode("utf-8", "replace"))
                    self.assertEqual(hs.temp_leftovers(d), [])
                    self.assertFalse(os.path.exists(report))
        finally:
            os.remove(p)

    def test_a_stop_while_reports_are_written_replaces_all_three_or_none(self):
        # A SIGTERM ~31-38 ms into a failing compare left its JSON new beside the previous run's
        # JUnit and HTML, exit 143 "no report written" (a review's). Stops spread over the
        # command's whole run: whatever the timing, the three agree, and an interrupted run
        # leaves the previous ones.
        a, b = self.demo["logits-a.h5"], self.demo["logits-b.h5"]
        d = self.path("stopped-reports")
        os.makedirs(d)
        reports = ["--json", os.path.join(d, "r.json"), "--html", os.path.join(d, "r.html"),
                   "--junit", os.path.join(d, "r.xml")]

        def verdicts():
            found = []
            for name, pattern in (("r.json", r'"verdict": "([A-Z]+)"'),
                                  ("r.html", r'data-verdict="([A-Z]+)"'),
                                  ("r.xml", r'ncert\.verdict" value="([A-Z]+)"')):
                with open(os.path.join(d, name)) as f:
                    found.append(re.search(pattern, f.read()).group(1))
            return found

        stopped = 0
        for i in range(40):
            self.assertEqual(hs.run(["compare", a, a, "--threads", "1"] + reports).returncode, 0)
            proc = subprocess.Popen([hs.NCERT, "compare", a, b, "--threads", "1"] + reports,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE)
            time.sleep(0.001 * i)
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
            seen = verdicts()
            self.assertEqual(len(set(seen)), 1, "delay %d ms, exit %s: %s %s" % (i, proc.returncode, seen, err))
            if proc.returncode in (-signal.SIGTERM, 128 + signal.SIGTERM):
                stopped += 1
                self.assertEqual(seen[0], "PASS", "delay %d ms: stopped, yet replaced" % i)
            else:
                self.assertEqual((proc.returncode, seen[0]), (1, "FAIL"), err)
            self.assertEqual(hs.temp_leftovers(d), [])
        self.assertGreater(stopped, 0)


if __name__ == "__main__":
    unittest.main()
