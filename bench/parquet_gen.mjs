// parquet_gen.mjs - the Parquet file of bench/parquet.sh: a tokenized-text
// shard as the Hub publishes them: `input_ids: list<int32>` (ROWS rows of
// 64..1024 token ids below 50,000), `text: utf8` (about 400 bytes a row, words
// drawn from a vocabulary), SNAPPY, data page v1, the writer's default
// dictionary and page settings (npm parquet-wasm = the Rust parquet crate).
// usage: NODE_PATH=build/npm/node_modules node parquet_gen.mjs OUT.parquet [ROWS]
import { createRequire } from 'module';
import { writeFileSync } from 'fs';
const require = createRequire(import.meta.url);
const arrow = require('apache-arrow');
const pw = require('parquet-wasm/node');
const out = process.argv[2];
const ROWS = Number(process.argv[3] || 20000);
let seed = 42;
// mulberry32: 32-bit integer arithmetic (a float LCG loses bits past 2^53 and cycles)
const rnd = () => { seed = (seed + 0x6D2B79F5) | 0; let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t; return ((t ^ (t >>> 14)) >>> 0) / 4294967296; };
const words = Array.from({ length: 5000 }, (_, i) => 'w' + i.toString(36) + (i % 7 === 0 ? 'ing' : ''));
const ids = [], text = [];
for (let r = 0; r < ROWS; r++) {
  const n = 64 + Math.floor(rnd() * 960);
  const a = new Int32Array(n);
  for (let i = 0; i < n; i++) a[i] = Math.floor(rnd() * 50000);
  ids.push(Array.from(a));
  let s = '';
  while (s.length < 400) s += words[Math.floor(rnd() * words.length)] + ' ';
  text.push(s);
}
const t = new arrow.Table({
  input_ids: arrow.vectorFromArray(ids, new arrow.List(new arrow.Field('item', new arrow.Int32(), true))),
  text: arrow.vectorFromArray(text, new arrow.Utf8()),
});
const props = new pw.WriterPropertiesBuilder().setCompression(pw.Compression.SNAPPY)
  .setWriterVersion(pw.WriterVersion.V1).build();
writeFileSync(out, pw.writeParquet(pw.Table.fromIPCStream(arrow.tableToIPC(t, 'stream')), props));
