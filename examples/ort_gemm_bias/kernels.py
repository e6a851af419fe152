"""The real kernel this example certifies, and the ONNX model it runs.

ONNX Runtime (onnxruntime-node, CPU execution provider) on one ``Gemm`` node, opset 13:
Y = A · Bᵀ + C with A float32 [M, K], B float32 [N, K] an initializer (transB = 1) and C
float32 [N] an initializer (the bias). ORT's Gemm<float> kernel broadcasts C into Y, then calls
MLAS' SGEMM with beta = 1 on B prepacked: MLAS adds each block of K
(MLAS_SGEMM_PACKED_STRIDEK = 256 terms, summed from zero as one FMA chain per output) into Y,
the bias first (README.md, "What ORT computes").
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import numpy as np

from harness import OrtCalls, save_opset13_model  # examples/common, on sys.path beside this folder


def build_gemm_model(path: Path, w: np.ndarray, bias: np.ndarray) -> None:
    """Writes an ONNX model Y = Gemm(A, W, bias, transB = 1): A float32 [M, K] (M free),
    W float32 [N, K] and bias float32 [N] initializers."""
    from onnx import TensorProto, helper, numpy_helper

    n, k = w.shape
    node = helper.make_node("Gemm", ["A", "B", "C"], ["Y"], transB=1)
    inits = [numpy_helper.from_array(np.ascontiguousarray(w, dtype=np.float32), "B"),
             numpy_helper.from_array(np.ascontiguousarray(bias, dtype=np.float32), "C")]
    graph = helper.make_graph([node], "ort_gemm_bias",
                              [helper.make_tensor_value_info("A", TensorProto.FLOAT, ["M", k])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["M", n])], inits)
    save_opset13_model(path, graph, "ort_gemm_bias")


class OrtRunner(OrtCalls):
    """Gemm calls on float32 inputs, run in one node process (run_ort.js)."""

    def __init__(self, work: Path, ort_package: Path):
        super().__init__(work, ort_package, Path(__file__).with_name("run_ort.js"))

    def plan(self, model: Path, x: np.ndarray, n: int, optimized: Optional[Path] = None) -> int:
        """Queues Y = model(x) for x float32 [M, K]; returns the call's index for `result`."""
        i = len(self.calls)
        xp = self.work / f"call{i}.x"
        xp.write_bytes(np.ascontiguousarray(x, dtype="<f4").tobytes())
        call = {"model": str(model), "x": str(xp), "rows": int(x.shape[0]), "k": int(x.shape[1]),
                "n": n, "y": str(self.work / f"call{i}.y")}
        if optimized is not None:
            call["optimized"] = str(optimized)
        return self.queue(call)

    def result(self, i: int) -> np.ndarray:
        call = self.calls[i]
        y = np.frombuffer(Path(call["y"]).read_bytes(), dtype="<f4")
        return y.reshape(call["rows"], call["n"]).astype(np.float32)


def optimized_graph(path: Path) -> List[str]:
    """The nodes of a graph ORT saved (optimizedModelFilePath), as 'Op(inputs) -> outputs'."""
    import onnx

    model = onnx.load(str(path))
    return [f"{n.op_type}({', '.join(n.input)}) -> {', '.join(n.output)}" for n in model.graph.node]
