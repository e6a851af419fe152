// Runs MatMulNBits models with onnxruntime-node on the CPU and writes their outputs.
//
//   node run_ort.js ORT_PACKAGE_DIR JOB.json
//
// ORT_PACKAGE_DIR: the onnxruntime-node package (the directory holding its package.json).
// JOB.json: {"calls": [{"model": PATH, "x": PATH, "rows": M, "k": K, "y": PATH}, ...]}: each
// call reads A [M, K] as raw little-endian float32 from x, runs the model once and writes Y
// [M, N] as raw little-endian float32 to y. One session per model, created once, run with one
// intra-op thread and sequential execution so every call of a model takes the same kernel path.
// Prints one JSON line: {"onnxruntime": VERSION, "calls": COUNT}. Exit 1 on any error.
'use strict';

const fs = require('fs');
const path = require('path');

async function main() {
  const [pkgDir, jobPath] = process.argv.slice(2);
  if (!pkgDir || !jobPath) {
    throw new Error('usage: node run_ort.js ORT_PACKAGE_DIR JOB.json');
  }
  const ort = require(path.resolve(pkgDir));
  const version = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8')).version;
  const job = JSON.parse(fs.readFileSync(jobPath, 'utf8'));
  const options = {
    executionProviders: ['cpu'],
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: 'sequential',
  };
  const sessions = new Map();
  for (const call of job.calls) {
    if (!sessions.has(call.model)) {
      sessions.set(call.model, await ort.InferenceSession.create(call.model, options));
    }
    const session = sessions.get(call.model);
    const bytes = fs.readFileSync(call.x);
    if (bytes.length !== 4 * call.rows * call.k) {
      throw new Error(`${call.x}: ${bytes.length} bytes, expected ${4 * call.rows * call.k}`);
    }
    const a = new Float32Array(bytes.buffer, bytes.byteOffset, call.rows * call.k);
    const out = await session.run({A: new ort.Tensor('float32', a, [call.rows, call.k])});
    const y = out.Y.data;
    fs.writeFileSync(call.y, Buffer.from(y.buffer, y.byteOffset, y.byteLength));
  }
  process.stdout.write(JSON.stringify({onnxruntime: version, calls: job.calls.length}) + '\n');
}

main().catch((e) => {
  process.stderr.write(`run_ort.js: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
