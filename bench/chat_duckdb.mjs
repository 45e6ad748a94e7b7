// chat_duckdb.mjs FILE - the peer of bench/chat_pagein.py: npm @duckdb/node-api
// reads the messages column of a chat-shaped Parquet file and fetches every
// row as JS values (getRowObjects: lists and structs as JS arrays/objects);
// best of 3, rows/s as JSON.
import { createRequire } from 'module';
const require = createRequire(import.meta.url);
const { DuckDBInstance } = require('@duckdb/node-api');
const file = process.argv[2];
const inst = await DuckDBInstance.create(':memory:');
const con = await inst.connect();
let best = Infinity, n = 0;
for (let i = 0; i < 3; i++) {
  const t = process.hrtime.bigint();
  const r = await con.runAndReadAll(`SELECT messages FROM read_parquet('${file.replace(/'/g, "''")}')`);
  const rows = r.getRowObjectsJS();
  n = rows.length;
  best = Math.min(best, Number(process.hrtime.bigint() - t) / 1e9);
}
console.log(JSON.stringify({ rows: n, best_s: best, rows_per_s: n / best }));
