"""The weights and the ONNX model: one com.microsoft MatMulNBits node (4-bit blocks with zero
points), built with the `onnx` package from numpy arrays this module quantizes.

The quantizer is an asymmetric min/max block quantizer of the kind 4-bit model converters use
(per block of `block_size` consecutive input channels of one output column, the range widened to
include 0: scale = (max - min) / 15 in f32, zero point = round(-min / scale) clamped to 0..15,
code = clamp(round(w / scale) + zp, 0, 15)). The dump states whatever the model holds, so any
quantizer would do; this one gives zero points spread over 1..14 (blocks of 32) and 2..12 (blocks of 128).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from onnx import TensorProto, helper, numpy_helper


@dataclass
class QuantWeights:
    """The MatMulNBits inputs B, scales and zero_points exactly as the model stores them, and
    the same values unpacked for the dump."""

    n: int
    k: int
    block_size: int
    b: np.ndarray  # uint8 [N, K/block_size, block_size/2]: element 2j low nibble, 2j+1 high
    scales: np.ndarray  # float32 [N * K/block_size]
    zero_points: np.ndarray  # uint8 [N * ceil(G/2)]: group 2i low nibble, 2i+1 high
    codes: np.ndarray  # uint8 [N, K]: the 4-bit code of every element
    zp: np.ndarray  # uint8 [N, G]: the zero point of every group

    @property
    def groups(self) -> int:
        return self.k // self.block_size


def quantize(w: np.ndarray, block_size: int) -> QuantWeights:
    """Block-quantizes W [N, K] (K a multiple of block_size) to 4 bits with zero points."""
    n, k = w.shape
    g = k // block_size
    blocks = w.astype(np.float32).reshape(n, g, block_size)
    lo = np.minimum(blocks.min(axis=2), np.float32(0))
    hi = np.maximum(blocks.max(axis=2), np.float32(0))
    scale = ((hi - lo) / np.float32(15)).astype(np.float32)
    scale[scale == 0] = np.float32(1)
    zp = np.clip(np.rint(-lo / scale), 0, 15).astype(np.uint8)
    q = np.clip(np.rint(blocks / scale[:, :, None]) + zp[:, :, None], 0, 15).astype(np.uint8)
    codes = q.reshape(n, k)
    b = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8).reshape(n, g, block_size // 2)
    zp_cols = (g + 1) // 2
    padded = np.zeros((n, 2 * zp_cols), np.uint8)
    padded[:, :g] = zp
    zero_points = (padded[:, 0::2] | (padded[:, 1::2] << 4)).astype(np.uint8).reshape(-1)
    return QuantWeights(n=n, k=k, block_size=block_size, b=b, scales=scale.reshape(-1),
                        zero_points=zero_points, codes=codes, zp=zp)


def random_weights(n: int, k: int, block_size: int, seed: int) -> QuantWeights:
    rng = np.random.default_rng(seed)
    # A column-dependent offset makes the per-block minima differ in sign and size, so the zero
    # points are not all 8.
    w = rng.standard_normal((n, k)).astype(np.float32) * np.float32(0.05)
    w += rng.uniform(-0.04, 0.04, size=(n, 1)).astype(np.float32)
    return quantize(w, block_size)


def build_model(q: QuantWeights, accuracy_level: int) -> bytes:
    """The serialized model: Y[M, N] = MatMulNBits(A[M, K]) with B, scales and zero_points as
    initializers (so ONNX Runtime prepacks them, as it does for a real model's weights)."""
    node = helper.make_node(
        "MatMulNBits", ["A", "B", "scales", "zero_points"], ["Y"], domain="com.microsoft",
        K=q.k, N=q.n, bits=4, block_size=q.block_size, accuracy_level=accuracy_level)
    graph = helper.make_graph(
        [node], "matmulnbits",
        [helper.make_tensor_value_info("A", TensorProto.FLOAT, ["M", q.k])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["M", q.n])],
        initializer=[numpy_helper.from_array(q.b, "B"),
                     numpy_helper.from_array(q.scales, "scales"),
                     numpy_helper.from_array(q.zero_points, "zero_points")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    return model.SerializeToString()


def dequantize_f32(q: QuantWeights) -> np.ndarray:
    """W as MLAS dequantizes it: fl32((code - zp) * scale), the integer difference exact."""
    zp = np.repeat(q.zp.astype(np.int32), q.block_size, axis=1)
    s = np.repeat(q.scales.reshape(q.n, q.groups), q.block_size, axis=1)
    return ((q.codes.astype(np.int32) - zp).astype(np.float32) * s).astype(np.float32)


__all__ = ["QuantWeights", "quantize", "random_weights", "build_model", "dequantize_f32"]
