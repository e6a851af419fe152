// Times the engine kernel's two calls: one MatMulNBits model run with onnxruntime-node on the CPU.
//
//   node run_ort_timed.js ORT_PACKAGE_DIR JOB.json
//
// ORT_PACKAGE_DIR: the onnxruntime-node package (the directory holding its package.json).
// JOB.json: {"model": PATH, "k": K, "threads": T, "reps": R,
//            "calls": [{"x": PATH, "rows": M, "y": PATH}, ...]}
// One CPU session (intraOpNumThreads = T, one inter-op thread, sequential execution, as
// examples/ort_matmulnbits/run_ort.js but for the thread count). Each call reads A [M, K] as raw
// little-endian float32 from x. Every call runs once as a warm-up, whose output Y [M, N] is
// written to y as raw little-endian float32; then R repetitions run every call in order, each
// `session.run` timed alone (process start, session creation and file IO are not timed), and
// each output is compared bit for bit with the warm-up's.
// Prints one JSON line: {"onnxruntime": VERSION, "threads": T, "session_seconds": S,
// "seconds": [[call 0, call 1, ...] per repetition], "differ": [repetitions whose output differs
// from the warm-up's, per call]}. Exit 1 on any error.
'use strict';

const fs = require('fs');
const path = require('path');

async function main() {
  const [pkgDir, jobPath] = process.argv.slice(2);
  if (!pkgDir || !jobPath) {
    throw new Error('usage: node run_ort_timed.js ORT_PACKAGE_DIR JOB.json');
  }
  const ort = require(path.resolve(pkgDir));
  const version = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8')).version;
  const job = JSON.parse(fs.readFileSync(jobPath, 'utf8'));
  const options = {
    executionProviders: ['cpu'],
    intraOpNumThreads: job.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
  };
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(job.model, options);
  const sessionSeconds = Number(process.hrtime.bigint() - t0) / 1e9;

  const feeds = job.calls.map((call) => {
    const bytes = fs.readFileSync(call.x);
    if (bytes.length !== 4 * call.rows * job.k) {
      throw new Error(`${call.x}: ${bytes.length} bytes, expected ${4 * call.rows * job.k}`);
    }
    const a = new Float32Array(bytes.buffer, bytes.byteOffset, call.rows * job.k);
    return {A: new ort.Tensor('float32', a, [call.rows, job.k])};
  });
  const bytesOf = (y) => Buffer.from(y.buffer, y.byteOffset, y.byteLength);

  const first = [];
  for (let i = 0; i < job.calls.length; i++) {  // the warm-up runs: the outputs the dump holds
    const y = (await session.run(feeds[i])).Y.data;
    first.push(Buffer.from(bytesOf(y)));  // a copy: the run's buffer is not ours to keep
    fs.writeFileSync(job.calls[i].y, first[i]);
  }
  const seconds = [];
  const differ = job.calls.map(() => 0);
  for (let rep = 0; rep < job.reps; rep++) {
    const times = [];
    for (let i = 0; i < job.calls.length; i++) {
      const start = process.hrtime.bigint();
      const out = await session.run(feeds[i]);
      times.push(Number(process.hrtime.bigint() - start) / 1e9);
      if (!bytesOf(out.Y.data).equals(first[i])) {
        differ[i] += 1;
      }
    }
    seconds.push(times);
  }
  process.stdout.write(JSON.stringify({onnxruntime: version, threads: job.threads,
    session_seconds: sessionSeconds, seconds, differ}) + '\n');
}

main().catch((e) => {
  process.stderr.write(`run_ort_timed.js: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
