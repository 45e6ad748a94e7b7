// parquet_duckdb.mjs - DuckDB (npm @duckdb/node-api, its native library) as
// a peer of bench/parquet.sh and bench/parquet_epoch.sh: reads every value
// of the given columns of a Parquet file, ITERS times, at each thread count
// given (1 and all: "1,0", 0 = DuckDB's default, every core). Every value is
// touched by an aggregate (list<int>: sum(list_sum(c)); strings:
// sum(strlen(c)); numbers: sum(c); anything else: count(c)), so nothing is
// skipped. Prints JSON: {"rows", "version", "threads": {"1": {...}, "all":
// {...}}} with best, median and CPU median seconds per thread count (the
// first query of the instance thrown away: it warms the file's metadata up),
// and per thread count `first`: {"s", "cpu_s"} of the first query of a fresh
// process (a child: node started, DuckDB loaded, the instance made and the
// columns' types asked, then the one query timed), what a process that
// reads the file once pays.
// usage: NODE_PATH=build/npm/node_modules node parquet_duckdb.mjs FILE[,FILE...] ITERS THREADS COL...
import { createRequire } from 'module';
import { cpus as ncpus } from 'os';
import { execFileSync } from 'child_process';
import { fileURLToPath } from 'url';
const require = createRequire(import.meta.url);
const { DuckDBInstance } = require('@duckdb/node-api'); // NODE_PATH: build/npm/node_modules

const [files, iters, threadList, ...columns] = process.argv.slice(2);
const list = files.split(',').map((f) => `'${f.replace(/'/g, "''")}'`).join(', ');
const src = `read_parquet([${list}])`;
const inst = await DuckDBInstance.create(':memory:');
const con = await inst.connect();
const q = (sql) => con.runAndReadAll(sql).then((r) => r.getRows());
const version = (await q('select version()'))[0][0];
const desc = await q(`describe select ${columns.map((c) => `"${c}"`).join(', ')} from ${src}`);
const aggs = desc.map(([name, type]) => {
  const c = `"${name}"`;
  if (/\[\]$/.test(type) && /INT|FLOAT|DOUBLE|DECIMAL/.test(type)) return `sum(list_sum(${c}))`;
  if (/\[\]$/.test(type)) return `sum(len(${c}))`;
  if (/VARCHAR|BLOB/.test(type)) return `sum(strlen(${c}))`;
  if (/INT|FLOAT|DOUBLE|DECIMAL/.test(type)) return `sum(${c})`;
  return `count(${c})`;
});
const sql = `select count(*), ${aggs.join(', ')} from ${src}`;
const timed = async () => {
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const rows = await q(sql);
  const cu = process.cpuUsage(c0);
  return { rows, s: Number(process.hrtime.bigint() - t0) / 1e9, cpu_s: (cu.user + cu.system) / 1e6 };
};
if (process.env.PARQUET_DUCKDB_FIRST) { // the child: one thread count, one query
  await q(`set threads = ${Number(threadList)}`);
  const r = await timed();
  console.log(JSON.stringify({ s: r.s, cpu_s: r.cpu_s, rows: Number(r.rows[0][0]) }));
  process.exit(0);
}
const out = { version, query: sql, threads: {} };
for (const t of threadList.split(',').map(Number)) {
  const n = t > 0 ? t : ncpus().length;
  const child = execFileSync(process.execPath, [fileURLToPath(import.meta.url), files, '1', String(n), ...columns],
                             { env: { ...process.env, PARQUET_DUCKDB_FIRST: '1' } });
  const first = JSON.parse(child.toString());
  await q(`set threads = ${n}`);
  const times = [], cpu = [];
  for (let i = 0; i < Number(iters) + 1; i++) {
    const { rows, s, cpu_s } = await timed();
    if (i === 0) out.rows = Number(rows[0][0]);
    else { times.push(s); cpu.push(cpu_s); } // the first run warms the file's metadata up
  }
  times.sort((a, b) => a - b);
  cpu.sort((a, b) => a - b);
  out.threads[t > 0 ? String(t) : 'all'] = { n, best: times[0], median: times[Math.floor(times.length / 2)],
                                             cpu_median: cpu[Math.floor(cpu.length / 2)],
                                             first: { s: first.s, cpu_s: first.cpu_s } };
}
console.log(JSON.stringify(out));
