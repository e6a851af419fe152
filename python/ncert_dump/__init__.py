"""ncert_dump: write ncert engine dumps (HDF5 dump-format v1 or v2) from Python.

A dump written here loads in ``ncert inspect`` / ``ncert check``; whatever the C++ reader would
refuse is refused while writing, with the reader's error name, object path and sentence.

Example (one bf16 projection, every row its own slot, and a greedy run)::

    import numpy as np
    from ncert_dump import DumpWriter, Segment, bf16_from_f32, f32_from_bf16

    x = bf16_from_f32(np.random.randn(4, 64))            # activations as bf16 patterns
    w = bf16_from_f32(np.random.randn(32, 64) / 8)       # W [n, k]
    y = f32_from_bf16(x).astype(np.float64) @ f32_from_bf16(w).astype(np.float64).T
    with DumpWriter("dump.h5", engine="my-engine", build="abc123") as dw:
        dw.add_projection("q", x=x, x_dtype="bf16", weights=[Segment("bf16", 0, 32, values=w)],
                          accumulator="f32-rn", output_dtype="bf16",
                          selector=np.arange(4, dtype=np.int32),
                          y_unpacked=bf16_from_f32(y))   # round to nearest even, like a kernel
        logits = np.random.randn(3, 100).astype(np.float32)
        dw.add_logits_run("greedy", tokens=logits.argmax(axis=1).astype(np.int32),
                          logits=logits)
    # then: ncert check dump.h5

See python/README.md for every argument and what it maps to in the format.
"""

from .af4 import (CODEBOOKS, codebook_table, dequantize, pack_codes, quantize_affine,
                  quantize_codebook, unpack_codes)
from .codecs import (bf16_from_f32, bf16_truncate, decode, f16_from_f32, f32_from_bf16,
                     f32_from_f16)
from .errors import ERROR_NAMES, DumpFormatError
from .packing import canonical_selector, pack_rows, scatter_rows
from .segments import Segment
from .writer import DumpWriter
from .weights_hash import weights_xxh3

__version__ = "0.1.0"

__all__ = [
    "DumpWriter",
    "weights_xxh3",
    "DumpFormatError",
    "ERROR_NAMES",
    "Segment",
    "bf16_from_f32",
    "bf16_truncate",
    "f32_from_bf16",
    "f16_from_f32",
    "f32_from_f16",
    "decode",
    "CODEBOOKS",
    "codebook_table",
    "pack_codes",
    "unpack_codes",
    "quantize_affine",
    "quantize_codebook",
    "dequantize",
    "canonical_selector",
    "pack_rows",
    "scatter_rows",
]
