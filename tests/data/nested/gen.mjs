// gen.mjs - the committed nested-type fixtures of python/tests/test_nested.py,
// written by writers nobody here wrote: npm apache-arrow builds a chat-shaped
// table (messages: list<struct<role, content>>, as ultrachat_200k) with a map,
// lists of lists, a decimal, timestamps, dates and nulls at every level;
// npm parquet-wasm (the Rust parquet crate) writes it as Parquet (nested.parquet)
// and apache-arrow as an Arrow IPC file (nested.arrow). The expected values are
// each writer's own read-back, canonical JSON per row (bench/corpus_ref.mjs):
// nested.parquet.jsonl, nested.arrow.jsonl.
// usage: NODE_PATH=build/npm/node_modules node tests/data/nested/gen.mjs OUTDIR
import { createRequire } from 'module';
import { writeFileSync } from 'fs';
import { execFileSync } from 'child_process';
import { fileURLToPath } from 'url';
import path from 'path';
const require = createRequire(import.meta.url);
const A = require('apache-arrow');
const pw = require('parquet-wasm/node');
const out = process.argv[2];
const ROWS = 120;
let seed = 7;
const rnd = () => { seed = (seed + 0x6D2B79F5) | 0; let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t; return ((t ^ (t >>> 14)) >>> 0) / 4294967296; };
const rint = (lo, hi) => lo + Math.floor(rnd() * (hi - lo + 1));
const words = ['hello', 'how are you?', 'δέλτα', '日本語', '', 'a longer answer with several words in it'];
const cols = { id: [], messages: [], meta: [], grid: [], price: [], ts: [], day: [] };
for (let r = 0; r < ROWS; r++) {
  cols.id.push(BigInt(r));
  cols.messages.push(r % 17 === 5 ? null : Array.from({ length: rint(0, 5) }, (_, k) =>
    (r % 11 === 3 && k === 1) ? null : { role: k % 2 ? 'assistant' : 'user', content: r % 13 === 7 ? null : words[rint(0, 5)] + ' ' + r }));
  cols.meta.push(r % 7 === 2 ? null : new Map(Array.from({ length: rint(0, 3) }, (_, k) => ['k' + k, r % 5 === 1 ? null : rint(-100, 100)])));
  cols.grid.push(r % 9 === 4 ? null : Array.from({ length: rint(0, 3) }, () => rnd() < 0.1 ? null : Array.from({ length: rint(0, 3) }, () => rint(0, 9))));
  cols.price.push(r % 6 === 0 ? null : new Uint32Array([rint(0, 1e9), r % 2 ? 0xffffffff : 0, r % 2 ? 0xffffffff : 0, r % 2 ? 0xffffffff : 0]));
  cols.ts.push(r % 8 === 3 ? null : BigInt(1700000000000 + r * 1234567));
  cols.day.push(r % 10 === 9 ? null : 19000 + r);
}
const f = (n, t, nullable = true) => new A.Field(n, t, nullable);
const types = {
  id: new A.Int64(),
  messages: new A.List(f('item', new A.Struct([f('role', new A.Utf8()), f('content', new A.Utf8())]))),
  meta: new A.Map_(f('entries', new A.Struct([f('key', new A.Utf8(), false), f('value', new A.Int32())]), false)),
  grid: new A.List(f('item', new A.List(f('item', new A.Int32())))),
  price: new A.Decimal(4, 18, 128),
  ts: new A.TimestampMillisecond(),
  day: new A.DateDay(),
};
const vecs = {};
for (const k of Object.keys(cols)) {
  if (k === 'day') { vecs[k] = A.vectorFromArray(cols[k].map(d => d === null ? null : new Date(d * 86400000)), types[k]); continue; }
  vecs[k] = A.vectorFromArray(cols[k], types[k]);
}
const table = new A.Table(vecs);
writeFileSync(path.join(out, 'nested.arrow'), A.tableToIPC(table, 'file'));
const w = pw.Table.fromIPCStream(A.tableToIPC(table, 'stream'));
const props = new pw.WriterPropertiesBuilder().setCompression(pw.Compression.SNAPPY).setMaxRowGroupSize(50).build();
writeFileSync(path.join(out, 'nested.parquet'), pw.writeParquet(w, props));
const ref = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'bench', 'corpus_ref.mjs');
for (const [kind, file] of [['parquet', 'nested.parquet'], ['arrow', 'nested.arrow']])
  writeFileSync(path.join(out, file + '.jsonl'), execFileSync('node', [ref, kind, path.join(out, file)], { env: process.env }));
