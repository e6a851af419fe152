"""A map of an HDF5 file: where its metadata lives, for the mutation runner (mutate.py).

Best effort and never failing: the superblock (v0-v3); every version-1 object header reachable
from the root through symbol-table B-trees, symbol nodes and link messages, as one region for
its prefix and one per message; and every structure found by its signature (TREE, HEAP and its
data segment, SNOD, GCOL and the v2 structures). A file it cannot parse still gets a map, just
a smaller one. H5Map.normalize sets every v1 modification time to FIXED_MTIME, so dumps written
at different times give the same bytes.

Python 3 standard library only. See tools/fuzz/README.md, "Mutation kinds".
"""

import struct

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"

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


class Region:
    """Bytes [start, end) of one metadata structure or message; its category weighs the pick
    (H5Map.weights) and its label names it in a mutation's description."""

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
