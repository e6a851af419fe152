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

const fs = require('fs');
const path = require('path');

function f32(file, count) {
  const bytes = fs.readFileSync(file);
  if (bytes.length !== 4 * count) {
    throw new Error(`${file}: ${bytes.length} bytes, expected ${4 * count}`);
  }
  const copy = Uint8Array.from(bytes);  // an aligned buffer for the 32-bit view
  return new Float32Array(copy.buffer, 0, count);
}

async function main() {
  const [pkgDir, jobPath] = process.argv.slice(2);
  if (!pkgDir || !jobPath) {
    throw new Error('usage: node run_ort.js ORT_PACKAGE_DIR JOB.json');
  }
  const ort = require(path.resolve(pkgDir));
  const version = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8')).version;
  const job = JSON.parse(fs.readFileSync(jobPath, 'utf8'));
  const sessions = new Map();
  for (const call of job.calls) {
    if (!sessions.has(call.model)) {
      const options = {
        executionProviders: ['cpu'],
        intraOpNumThreads: 1,
        interOpNumThreads: 1,
        executionMode: 'sequential',
        // 'basic' keeps the graph as built: the extended level's QDQ fusion turns DequantizeLinear
        // + MatMul into MatMulIntegerToFloat, which refuses FP8 inputs at session creation.
        graphOptimizationLevel: job.optimization || 'basic',
      };
      sessions.set(call.model, await ort.InferenceSession.create(call.model, options));
    }
    const session = sessions.get(call.model);
    const feeds = {
      X: new ort.Tensor('float32', f32(call.x, call.rows * call.k), [call.rows, call.k]),
      S: new ort.Tensor('float32', f32(call.s, call.s_shape.reduce((a, b) => a * b, 1)), call.s_shape),
    };
    const out = await session.run(feeds, Object.keys(call.outputs));
    for (const [name, file] of Object.entries(call.outputs)) {
      const y = out[name].data;
      fs.writeFileSync(file, Buffer.from(y.buffer, y.byteOffset, y.byteLength));
    }
  }
  process.stdout.write(JSON.stringify({onnxruntime: version, calls: job.calls.length}) + '\n');
}

main().catch((e) => {
  process.stderr.write(`run_ort.js: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
