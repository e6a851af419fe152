// What the examples' run_ort.js scripts share: onnxruntime-node loaded from its package
// directory, a job of calls read from JSON, one session per model, raw little-endian tensors
// read and written. Each script keeps only what one of its calls feeds and writes.
'use strict';

const fs = require('fs');
const path = require('path');

// `count` elements of TypedArray read from a raw little-endian file of exactly that size, as a
// copy: an aligned buffer for the typed view.
function readTyped(file, count, TypedArray) {
  const bytes = fs.readFileSync(file);
  const want = TypedArray.BYTES_PER_ELEMENT * count;
  if (bytes.length !== want) {
    throw new Error(`${file}: ${bytes.length} bytes, expected ${want}`);
  }
  const copy = Uint8Array.from(bytes);
  return new TypedArray(copy.buffer, 0, count);
}

// An output tensor's raw little-endian bytes, written to `file`.
function writeTensor(file, tensor) {
  const y = tensor.data;
  fs.writeFileSync(file, Buffer.from(y.buffer, y.byteOffset, y.byteLength));
}

// node run_ort.js ORT_PACKAGE_DIR JOB.json, with JOB.json {"calls": [...], ...}: one session per
// model, created once, run with one intra-op thread and sequential execution so every call of a
// model takes the same kernel path (`extraOptions(call, job)` adds a script's own session
// options); `runCall(ort, session, call)` runs each call. Prints one JSON line:
// {"onnxruntime": VERSION, "calls": COUNT}. Exit 1 on any error.
function runJob(runCall, extraOptions = () => ({})) {
  const main = async () => {
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
          ...extraOptions(call, job),
        };
        sessions.set(call.model, await ort.InferenceSession.create(call.model, options));
      }
      await runCall(ort, sessions.get(call.model), call);
    }
    process.stdout.write(JSON.stringify({onnxruntime: version, calls: job.calls.length}) + '\n');
  };
  main().catch((e) => {
    process.stderr.write(`run_ort.js: ${e && e.stack ? e.stack : e}\n`);
    process.exit(1);
  });
}

module.exports = {readTyped, writeTensor, runJob};
