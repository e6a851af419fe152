"""The one exception the package raises for a dump it will not write.

Every refusal carries the same error name (docs/error-codes.md), object path and sentence that
`ncert inspect` / `ncert check` would print for the same object, so an engine team sees one
vocabulary whether the mistake is caught while writing or while reading.
"""

from __future__ import annotations

__all__ = ["DumpFormatError", "ERROR_NAMES"]

#: The error names the writer can raise, with the numeric codes of reference/status.h.
ERROR_NAMES = {
    "invalid-argument": 101,
    "output-exists": 102,
    "io": 200,
    "datatype-refused": 220,
    "missing-attribute": 221,
    "attribute-invalid": 222,
    "missing-member": 223,
    "shape-mismatch": 224,
    "schema-unknown": 227,
    "schema-version": 228,
    "guard-cap-exceeded": 302,
    "guard-commit-mismatch": 304,
    "guard-too-few-slots": 305,
    "guard-stride-below-width": 306,
    "guard-extent-too-small": 307,
    "guard-segment-table": 308,
    "guard-af4-geometry": 309,
    "guard-walk-split": 314,
    "guard-plan-shape": 315,
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
}


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
