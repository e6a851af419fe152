// Runs the FP8 quantize models with onnxruntime-node on the CPU and writes their outputs.
//
//   node run_ort.js ORT_PACKAGE_DIR JOB.json
//
// ORT_PACKAGE_DIR: the onnxruntime-node package (the directory holding its package.json).
// JOB.json: {"calls": [{"model": PATH, "x": PATH, "s": PATH, "rows": M, "k": K, "s_shape": [M]
// or [M, G], "outputs": {"Q": PATH, "Y": PATH}}, ...]}: each call reads X [M, K] and the scales
// S (per row, or per row and block) as raw little-endian float32, runs the model once and writes each named output's raw
// little-endian float32 bytes to its path. One session per model, created once, run with one
// intra-op thread and sequential execution. Prints one JSON line: {"onnxruntime": VERSION,
// "calls": COUNT}. Exit 1 on any error.
'use strict';

const path = require('path');
const {readTyped, writeTensor, runJob} = require(path.join(__dirname, '..', 'common', 'ort_job.js'));

runJob(async (ort, session, call) => {
  const feeds = {
    X: new ort.Tensor('float32', readTyped(call.x, call.rows * call.k, Float32Array), [call.rows, call.k]),
    S: new ort.Tensor('float32', readTyped(call.s, call.s_shape.reduce((a, b) => a * b, 1), Float32Array),
                      call.s_shape),
  };
  const out = await session.run(feeds, Object.keys(call.outputs));
  for (const [name, file] of Object.entries(call.outputs)) {
    writeTensor(file, out[name]);
  }
}, (call, job) => ({
  // 'basic' keeps the graph as built: the extended level's QDQ fusion turns DequantizeLinear
  // + MatMul into MatMulIntegerToFloat, which refuses FP8 inputs at session creation.
  graphOptimizationLevel: job.optimization || 'basic',
}));
