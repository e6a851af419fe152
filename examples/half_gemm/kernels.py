"""The real CPU kernels this example certifies, and the ONNX models it runs.

- ONNX Runtime (onnxruntime-node, CPU execution provider) on a float16 ``MatMul``: on x86-64
  ORT has no float16 MatMul kernel, so its graph optimizer rewrites the node into
  Cast(A, f16 -> f32) -> MatMul<float> (MLAS SGEMM, the f16 weights widened once to f32) ->
  Cast(f32 -> f16). ``OrtRunner.save_optimized`` saves that rewritten graph for README.md.
- PyTorch (Debian's python3-torch 1.13) ``torch.nn.functional.linear`` on bfloat16 CPU tensors:
  oneDNN's matmul (``brg:avx512_core_bf16`` on AVX512-BF16 machines, ONEDNN_VERBOSE=1 shows
  it). Torch 1.13 has no float16 GEMM on the CPU ("addmm_impl_cpu_" not implemented for 'Half').

Every array crossing this module is numpy: f16 as ``float16``, bf16 as ``uint16`` bit patterns.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import List, Optional

import numpy as np

from harness import OrtCalls, save_opset13_model  # examples/common, on sys.path beside this folder


def build_matmul_model(path: Path, w: np.ndarray, output: str, input_dtype: str = "f16") -> None:
    """Writes an ONNX model Y = A · Wᵀ with A float16 [M, K] (M free) and W float16 [N, K].

    `output` "f16": one MatMul node on float16 tensors, the model an f16 engine ships.
    `output` "f32": Cast(A -> f32) then MatMul with the same weights widened to f32, Y float32:
    the graph ORT runs for the "f16" model without its final Cast, so Y is the f32 accumulator
    the f16 output is rounded from (README.md, "What was measured").
    `input_dtype` "f32" (with `output` "f32"): A float32 and W's float32 values as they are, one
    MatMul node, MLAS SGEMM on f32 data (examples/legit_sweep runs it).
    """
    from onnx import TensorProto, helper, numpy_helper

    n, k = w.shape
    a_type = TensorProto.FLOAT16
    b16 = np.ascontiguousarray(w.astype(np.float16).T)  # MatMul's B is [K, N]
    if input_dtype == "f32":
        if output != "f32":
            raise ValueError(f"input_dtype f32 takes output f32, not {output!r}")
        nodes = [helper.make_node("MatMul", ["A", "B"], ["Y"])]
        inits = [numpy_helper.from_array(np.ascontiguousarray(w.astype(np.float32).T), "B")]
        a_type, y_type = TensorProto.FLOAT, TensorProto.FLOAT
    elif input_dtype != "f16":
        raise ValueError(f"input_dtype {input_dtype!r} is not f16 or f32")
    elif output == "f16":
        nodes = [helper.make_node("MatMul", ["A", "B"], ["Y"])]
        inits = [numpy_helper.from_array(b16, "B")]
        y_type = TensorProto.FLOAT16
    elif output == "f32":
        nodes = [helper.make_node("Cast", ["A"], ["A32"], to=TensorProto.FLOAT),
                 helper.make_node("MatMul", ["A32", "B"], ["Y"])]
        inits = [numpy_helper.from_array(b16.astype(np.float32), "B")]
        y_type = TensorProto.FLOAT
    else:
        raise ValueError(f"output {output!r} is not f16 or f32")
    graph = helper.make_graph(nodes, "half_gemm",
                              [helper.make_tensor_value_info("A", a_type, ["M", k])],
                              [helper.make_tensor_value_info("Y", y_type, ["M", n])], inits)
    save_opset13_model(path, graph, "half_gemm")


class OrtRunner(OrtCalls):
    """MatMul calls on float16 inputs, run in one node process (run_ort.js)."""

    def __init__(self, work: Path, ort_package: Path):
        super().__init__(work, ort_package, Path(__file__).with_name("run_ort.js"))

    def plan(self, model: Path, x: np.ndarray, out_dtype, optimized: Optional[Path] = None) -> int:
        """Queues Y = model(x) for x float16 [M, K]; returns the call's index for `result`."""
        i = len(self.calls)
        xp = self.work / f"call{i}.x"
        xp.write_bytes(np.ascontiguousarray(x, dtype="<f2").tobytes())
        call = {"model": str(model), "x": str(xp), "rows": int(x.shape[0]),
                "k": int(x.shape[1]), "y": str(self.work / f"call{i}.y"),
                "out_dtype": np.dtype(out_dtype).str}
        if optimized is not None:
            call["optimized"] = str(optimized)
        return self.queue(call)

    def result(self, i: int, n: int) -> np.ndarray:
        call = self.calls[i]
        y = np.frombuffer(Path(call["y"]).read_bytes(), dtype=np.dtype(call["out_dtype"]))
        return y.reshape(call["rows"], n).copy()


def optimized_graph(path: Path) -> List[str]:
    """The nodes of a graph ORT saved (optimizedModelFilePath), as 'Op(inputs) -> outputs'."""
    import onnx

    model = onnx.load(str(path))
    return [f"{n.op_type}({', '.join(n.input)}) -> {', '.join(n.output)}" for n in model.graph.node]


def torch_available() -> Optional[str]:
    """None when torch imports, else why not."""
    try:
        import torch  # noqa: F401
    except ImportError as e:
        return f"torch is not installed (Debian: python3-torch; tools/install-deps): {e}"
    return None


def torch_bf16_linear(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """torch.nn.functional.linear on bf16 CPU tensors: x uint16 [M, K], w uint16 [N, K] bf16
    patterns; returns the bf16 output's patterns uint16 [M, N]."""
    import torch

    xt = torch.from_numpy(x.astype(np.int16)).view(torch.bfloat16)
    wt = torch.from_numpy(w.astype(np.int16)).view(torch.bfloat16)
    with torch.no_grad():
        y = torch.nn.functional.linear(xt, wt)
    assert y.dtype == torch.bfloat16
    return y.contiguous().view(torch.int16).numpy().astype(np.uint16)


def torch_kernel_name(m: int, k: int, n: int) -> str:
    """The oneDNN implementation torch runs for a bf16 linear of this shape, as ONEDNN_VERBOSE
    names it (e.g. 'brg:avx512_core_bf16'), or 'native' when oneDNN is not called."""
    code = ("import torch\n"
            f"x = torch.zeros({m}, {k}, dtype=torch.bfloat16)\n"
            f"w = torch.zeros({n}, {k}, dtype=torch.bfloat16)\n"
            "torch.nn.functional.linear(x, w)\n")
    with tempfile.TemporaryDirectory() as d:
        import os
        import sys
        env = dict(os.environ, ONEDNN_VERBOSE="1", DNNL_VERBOSE="1")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=env, cwd=d)
    for line in proc.stdout.splitlines():
        parts = line.split(",")
        if len(parts) > 4 and parts[1] == "exec" and parts[3] == "matmul":
            return parts[4]
    return "native"
