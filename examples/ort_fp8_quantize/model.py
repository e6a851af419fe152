"""The ONNX models: per-token FP8 quantization of X, then a MatMul with FP8 weights.

    X [M, K] f32, S [M] f32 (one scale per row: per token)
    q  = QuantizeLinear(X, S, axis = 0, saturate = 1, output_dtype = FP8)   opset 21
    Q  = DequantizeLinear(q, 1.0)            the codes' values, exactly (an FP8 value in f32)
    Xd = DequantizeLinear(q, S, axis = 0)    the kernel's activations, fl32(code · s)

or, per block of B values along K, S [M, K/B] and `axis = 1, block_size = B` in both (the
blocked form of opset 21), and then
    Wd = DequantizeLinear(Wq, Ws, axis = 1)  Wq [K, N] FP8 initializer, one scale per column
    Y  = MatMul(Xd, Wd)                      [M, N] f32 (MLAS SGEMM)

The weights are a real model's: FP8 codes and their scales stored as initializers. Q is an
output because onnxruntime-node returns no FP8 tensors: the code values come back as f32, and
each maps to exactly one code (fp8.codes_of_values). Xd and Wd are outputs too, so the
dequantization ORT ran can be compared with fl32(code · s)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Union

import numpy as np
import onnx
from onnx import TensorProto, helper

from fp8 import kOnnxType

kOpset = 21  # per-axis QuantizeLinear / DequantizeLinear with FP8 and `saturate`


def fp8_initializer(name: str, codes: np.ndarray, fmt: str) -> TensorProto:
    t = TensorProto()
    t.name = name
    t.data_type = kOnnxType[fmt]
    t.dims.extend(codes.shape)
    t.raw_data = np.ascontiguousarray(codes, dtype=np.uint8).tobytes()
    return t


def build(path: Path, fmt: str, w_codes_kn: np.ndarray, w_scales: np.ndarray,
          block: Optional[int] = None) -> None:
    """w_codes_kn: u8 FP8 codes [K, N]; w_scales: f32 [N]; block: None per token, else the
    activations' block along K."""
    k, n = w_codes_kn.shape
    per = {"axis": 0} if block is None else {"axis": 1, "block_size": block}
    s_shape: List[Union[str, int]] = ["M"] if block is None else ["M", k // block]
    inits = [
        helper.make_tensor("one", TensorProto.FLOAT, [], [1.0]),
        fp8_initializer("Wq", w_codes_kn, fmt),
        helper.make_tensor("Ws", TensorProto.FLOAT, [n], w_scales.astype(np.float32).tolist()),
    ]
    nodes = [
        # No zero point input (its absence is zero); output_dtype names the FP8 type.
        helper.make_node("QuantizeLinear", ["X", "S"], ["q"], saturate=1,
                         output_dtype=kOnnxType[fmt], **per),
        helper.make_node("DequantizeLinear", ["q", "one"], ["Q"]),
        helper.make_node("DequantizeLinear", ["q", "S"], ["Xd"], **per),
        helper.make_node("DequantizeLinear", ["Wq", "Ws"], ["Wd"], axis=1),
        helper.make_node("MatMul", ["Xd", "Wd"], ["Y"]),
    ]
    graph = helper.make_graph(
        nodes, f"fp8_{fmt}_matmul",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["M", k]),
         helper.make_tensor_value_info("S", TensorProto.FLOAT, s_shape)],
        [helper.make_tensor_value_info("Q", TensorProto.FLOAT, ["M", k]),
         helper.make_tensor_value_info("Xd", TensorProto.FLOAT, ["M", k]),
         helper.make_tensor_value_info("Wd", TensorProto.FLOAT, [k, n]),
         helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["M", n])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", kOpset)])
    model.ir_version = 10  # opset 21 needs IR version 10
    onnx.save(model, str(path))
