"""The one exception the package raises for a dump it will not write.

Every refusal carries the same error name (docs/error-codes.md), object path and sentence that
`ncert inspect` / `ncert check` would print for the same object, so an engine team sees one
vocabulary whether the mistake is caught while writing or while reading.
"""

from __future__ import annotations

__all__ = ["DumpFormatError", "ERROR_CODES", "ERROR_NAMES"]

# BEGIN generated: error-codes (ncert-docgen write)
#: Every error name of reference/error_codes.h with its number (docs/error-codes.md).
ERROR_CODES = {
    "usage": 100,
    "invalid-argument": 101,
    "output-exists": 102,
    "file-not-found": 103,
    "interrupted": 104,
    "path-conflict": 105,
    "not-regular-file": 106,
    "skip-policy-invalid": 107,
    "io": 200,
    "not-hdf5": 201,
    "hdf5": 202,
    "hdf5-crashed": 203,
    "hdf5-hung": 204,
    "report-write": 205,
    "external-link": 210,
    "external-storage": 211,
    "virtual-dataset": 212,
    "filter-refused": 213,
    "layout-refused": 214,
    "link-refused": 215,
    "object-aliased": 216,
    "tree-limit": 217,
    "storage-bomb": 218,
    "trailing-data": 219,
    "datatype-refused": 220,
    "missing-attribute": 221,
    "attribute-invalid": 222,
    "missing-member": 223,
    "shape-mismatch": 224,
    "size-overflow": 225,
    "memory-limit": 226,
    "schema-unknown": 227,
    "schema-version": 228,
    "shape-limit": 229,
    "vocab-mismatch": 230,
    "no-common-runs": 231,
    "witness-file-invalid": 232,
    "vocab-file-invalid": 233,
    "chunk-bomb": 234,
    "input-changed": 235,
    "guard-row-out-of-range": 300,
    "guard-duplicate-row": 301,
    "guard-cap-exceeded": 302,
    "guard-not-prefix": 303,
    "guard-commit-mismatch": 304,
    "guard-too-few-slots": 305,
    "guard-stride-below-width": 306,
    "guard-extent-too-small": 307,
    "guard-segment-table": 308,
    "guard-af4-geometry": 309,
    "guard-unsupported": 310,
    "guard-partial-overlap": 311,
    "guard-output-aliases-input": 312,
    "guard-misaligned": 313,
    "guard-walk-split": 314,
    "guard-plan-shape": 315,
    "guard-capacity": 316,
    "guard-canary-clobbered": 317,
    "format-unknown": 400,
    "af4-variant-unknown": 401,
    "af4-codebook-unknown": 402,
    "af4-packing-unknown": 403,
    "af4-dequant-unknown": 404,
    "accumulator-unknown": 405,
    "k-walk-invalid": 406,
    "epilogue-unknown": 407,
    "output-dtype-unknown": 408,
    "policy-invalid": 409,
    "output-rounding-unknown": 410,
    "dequant-op-unknown": 411,
    "x-quant-unknown": 412,
    "internal": 900,
}
# END generated: error-codes

#: The error names the writer can raise, with their numbers (an unknown name fails at import).
ERROR_NAMES = {name: ERROR_CODES[name] for name in (
    "invalid-argument", "output-exists", "io", "datatype-refused", "missing-attribute",
    "attribute-invalid", "missing-member", "shape-mismatch", "schema-unknown", "schema-version",
    "guard-cap-exceeded", "guard-commit-mismatch", "guard-too-few-slots",
    "guard-stride-below-width", "guard-extent-too-small", "guard-segment-table",
    "guard-af4-geometry", "guard-walk-split", "guard-plan-shape", "format-unknown",
    "chunk-bomb", "tree-limit", "not-regular-file", "shape-limit",
    "af4-variant-unknown", "af4-codebook-unknown", "af4-packing-unknown", "af4-dequant-unknown",
    "accumulator-unknown", "k-walk-invalid", "epilogue-unknown", "output-dtype-unknown",
    "policy-invalid", "output-rounding-unknown", "dequant-op-unknown", "x-quant-unknown",
)}


class DumpFormatError(ValueError):
    """A dump (or one member of it) that would break dump-format v1.

    Attributes:
        name: the stable error name, e.g. ``"shape-mismatch"`` (see ``ERROR_NAMES``).
        path: the HDF5 path of the offending object, e.g. ``"/projections/q/x"``.
        message: the sentence, worded as the C++ reader words it.
    """

    def __init__(self, name: str, path: str, message: str):
        if name not in ERROR_NAMES:
            raise AssertionError(f"unknown error name {name!r}")
        super().__init__(f"{path}: {message}")
        self.name = name
        self.path = path
        self.message = message

    @property
    def code(self) -> int:
        """The numeric error code (reference/status.h)."""
        return ERROR_NAMES[self.name]

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"

    def __repr__(self) -> str:
        return f"DumpFormatError({self.name!r}, {self.path!r}, {self.message!r})"
