// Runs ONNX Gemm models with onnxruntime-node on the CPU and writes their outputs.
//
//   node run_ort.js ORT_PACKAGE_DIR JOB.json
//
// ORT_PACKAGE_DIR: the onnxruntime-node package (the directory holding its package.json).
// JOB.json: {"calls": [{"model": PATH, "x": PATH, "rows": M, "k": K, "y": PATH}, ...]}: each
// call reads A [M, K] as raw little-endian float32 from x, runs the model once (input "A",
// output "Y") and writes Y [M, N] as raw little-endian float32 to y. One session per model,
// created once, run with one intra-op thread and sequential execution so every call of a model
// takes the same kernel path. With "optimized": PATH a call's session also saves the graph ONNX
// Runtime really runs there. Prints one JSON line: {"onnxruntime": VERSION, "calls": COUNT}.
// Exit 1 on any error.
'use strict';

const path = require('path');
const {readTyped, writeTensor, runJob} = require(path.join(__dirname, '..', 'common', 'ort_job.js'));

runJob(async (ort, session, call) => {
  const a = readTyped(call.x, call.rows * call.k, Float32Array);
  const out = await session.run({A: new ort.Tensor('float32', a, [call.rows, call.k])});
  writeTensor(call.y, out.Y);
}, (call) => (call.optimized ? {optimizedModelFilePath: call.optimized} : {}));
