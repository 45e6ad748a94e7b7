// parquet_wasm_read.mjs - the peer of bench/parquet.sh: npm parquet-wasm
// (the Rust parquet crate compiled to WebAssembly) reads all rows of the
// given columns of a Parquet file already in memory, ITERS times; prints the
// best and median seconds as JSON.
// usage: NODE_PATH=build/npm/node_modules node parquet_wasm_read.mjs FILE ITERS COL...
import { createRequire } from 'module';
import { readFileSync } from 'fs';
const require = createRequire(import.meta.url);
const pw = require('parquet-wasm/node');
const [file, iters, ...columns] = process.argv.slice(2);
const buf = new Uint8Array(readFileSync(file));
const times = [], cpus = [];
let rows = 0;
for (let i = 0; i < Number(iters) + 1; i++) {
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const t = pw.readParquet(buf, { columns });
  const dt = Number(process.hrtime.bigint() - t0) / 1e9;
  const cu = process.cpuUsage(c0);
  if (i === 0) rows = t.recordBatches().reduce((n, b) => n + b.numRows, 0);
  t.free();
  if (i) { times.push(dt); cpus.push((cu.user + cu.system) / 1e6); } // the first run warms the WebAssembly code up
}
times.sort((a, b) => a - b);
cpus.sort((a, b) => a - b);
console.log(JSON.stringify({ rows, best: times[0], median: times[Math.floor(times.length / 2)], cpu_median: cpus[Math.floor(cpus.length / 2)] }));
