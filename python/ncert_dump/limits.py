"""The C++ reader's limits that its rule table (schema_rules.json) does not carry.

The reader refuses a file that crosses one of these before (or while) it applies the member
rules, so a writer that did not know them would close files the reader refuses. They are
constants of the reader's code, not rows of its table, so they are mirrored here by hand;
tests/test_limits.py reads each one from the C++ source it names and fails when the two differ,
as tests/test_errors.py does for the error codes.
"""

from __future__ import annotations

__all__ = ["MAX_ATTRIBUTE_BYTES", "MAX_SMALL_CHUNKS", "SMALL_CHUNK_BYTES", "MAX_TREE_DEPTH",
           "MAX_LINKS", "MAX_SHAPE_VALUE"]

#: kMaxAttrBytes (certify/io/detail/hdf5_util.cc): a string attribute of more bytes (UTF-8, as
#: stored) reads as "<oversized: N bytes>", refused as larger than an attribute may be
#: (attribute-invalid).
MAX_ATTRIBUTE_BYTES = 1 << 20

#: kMaxSmallChunks and kSmallChunkBytes (certify/io/dump_reader.h): a chunked dataset of more
#: than MAX_SMALL_CHUNKS chunks each under SMALL_CHUNK_BYTES bytes is a chunk bomb (chunk-bomb).
MAX_SMALL_CHUNKS = 65_536
SMALL_CHUNK_BYTES = 1024

#: ReaderOptions::max_depth and max_objects (certify/io/dump_reader.h), the defaults `ncert`
#: reads with: a group MAX_TREE_DEPTH links below the root, or more than MAX_LINKS links in the
#: file, is refused (tree-limit).
MAX_TREE_DEPTH = 32
MAX_LINKS = 200_000

#: kMaxShapeValue (certify/io/schema_rules.h): an extent or count attribute (every integer rule with
#: a minimum of 0 or more: k, n, the strides, vocab, group sizes, segment rows, request
#: geometry) above it is refused as shape-limit.
MAX_SHAPE_VALUE = (1 << 32) - 1
