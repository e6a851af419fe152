"""Mutants: deterministic corrupted copies of a valid dump, for the mutation runner (mutate.py).

The runner gives mutant i of a seed the kind KINDS[i % len(KINDS)] (or the same round-robin over
the --kinds given). make_mutant draws from the mutant's own generator, mutant_rng(seed value,
seed file name, i), so its bytes depend only on the seed value, the seed's file name and bytes,
the index and the kind: the same in any process, in any order, with any number of jobs.
describe turns a mutation record into one line.

Python 3 standard library only. See tools/fuzz/README.md, "Mutation kinds".
"""

import hashlib
import random

from h5map import H5Map

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


class Seed:
    """A valid dump the mutants derive from: its (normalized) bytes and their H5Map."""

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


def _metadata_span(r, seed, size, m):
    """[lo, hi) of a metadata region picked with `r` (the whole file when the map found none),
    recorded in `m`."""
    region = _pick_region(r, seed.map)
    if region is None:
        m["region"] = "none found: whole file"
        return 0, size
    m["region"] = region.label
    return region.start, region.end


def make_mutant(seed, seed_value, index, kind):
    """Returns (bytes, mutation record). Depends only on the seed's bytes, name and index."""
    r = mutant_rng(seed_value, seed.name, index)
    src = seed.data
    size = len(src)
    buf = bytearray(src)
    m = {"kind": kind}
    if kind in ("flip_head", "flip_any", "flip_meta"):
        if kind == "flip_meta":
            lo, hi = _metadata_span(r, seed, size, m)
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
        lo, hi = _metadata_span(r, seed, size, m)
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
