"""The in-memory description of what is about to be written: groups with attributes, datasets
with an ncert element type and storage-ready bytes.

The writer builds one of these per call, validates it with the reader's rules (schema.py,
guards.py) and only then hands it to h5out.py. Validating the description, not the arguments,
means the checks see exactly the objects the reader will see.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

import numpy as np

__all__ = ["Stored", "Group", "STORAGE_DTYPES", "PATTERN_TYPES"]

#: ncert element type -> the little-endian numpy type its elements are stored as. bf16, e4m3
#: and e5m2 are stored as raw patterns (uint16, uint8) with the dataset attribute dtype naming
#: the type (PATTERN_TYPES); f16 as HDF5's 16-bit IEEE float (numpy float16, form a).
STORAGE_DTYPES: dict[str, np.dtype] = {
    "f32": np.dtype("<f4"),
    "f16": np.dtype("<f2"),
    "bf16": np.dtype("<u2"),
    "e4m3": np.dtype("<u1"),
    "e5m2": np.dtype("<u1"),
    "i8": np.dtype("<i1"),
    "u8": np.dtype("<u1"),
    "u32": np.dtype("<u4"),
    "i32": np.dtype("<i4"),
    "i64": np.dtype("<i8"),
}

#: Types stored as raw patterns of an integer type, named by the dataset attribute dtype.
PATTERN_TYPES = ("bf16", "e4m3", "e5m2")


@dataclass
class Stored:
    """One dataset: its ncert element type, its elements, how it is laid out on disk."""

    dtype: str
    array: np.ndarray
    attrs: dict = field(default_factory=dict)
    chunk_rows: Optional[int] = None
    deflate: Optional[int] = None
    shuffle: bool = False

    def __post_init__(self):
        want = STORAGE_DTYPES[self.dtype]
        if self.array.dtype != want:
            raise AssertionError(f"{self.dtype} stored as {self.array.dtype}, expected {want}")

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.array.shape)

    @property
    def chunks(self) -> Optional[tuple[int, ...]]:
        """The chunk dims the dataset is stored with (whole rows, at most all of them), or None
        for contiguous storage: what h5out writes and the chunk-count check judges."""
        if self.chunk_rows is None or self.array.ndim < 1 or self.array.size == 0:
            return None
        rows = max(1, min(int(self.chunk_rows), self.shape[0]))
        return (rows,) + self.shape[1:]


@dataclass
class Group:
    """One group: attributes (str or int values once validated) and named members."""

    attrs: dict = field(default_factory=dict)
    members: dict = field(default_factory=dict)

    def dataset(self, leaf: str) -> Optional[Stored]:
        m = self.members.get(leaf)
        return m if isinstance(m, Stored) else None

    def group(self, leaf: str) -> Optional["Group"]:
        m = self.members.get(leaf)
        return m if isinstance(m, Group) else None


Node = Union[Group, Stored]
