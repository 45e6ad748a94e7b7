// parquet_gen.mjs - the Parquet file of bench/parquet.sh: a tokenized-text
// shard as the Hub publishes them: `input_ids: list<int32>` (ROWS rows of
// 64..1024 token ids below 50,000), `text: utf8` (about 400 bytes a row, words
// drawn from a vocabulary), SNAPPY, data page v1, the writer's default
// dictionary and page settings (npm parquet-wasm = the Rust parquet crate).
// usage: NODE_PATH=build/npm/node_modules node parquet_gen.mjs OUT.parquet [ROWS [GROUP_ROWS SEED OUT.jsonl]]
// GROUP_ROWS: rows a row group (0: the writer's default); SEED: the data's
// seed (default 42); OUT.jsonl: the same rows as JSON lines
// {"input_ids": [...], "text": "..."} (bench/parquet_epoch.sh's comparison).
import { createRequire } from 'module';
import { writeFileSync } from 'fs';
const require = createRequire(import.meta.url);
const arrow = require('apache-arrow');
const pw = require('parquet-wasm/node');
const out = process.argv[2];
const ROWS = Number(process.argv[3] || 20000);
const GROUP_ROWS = Number(process.argv[4] || 0);
let seed = Number(process.argv[5] || 42);
const JSONL = process.argv[6] || '';
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
let pb = new pw.WriterPropertiesBuilder().setCompression(pw.Compression.SNAPPY).setWriterVersion(pw.WriterVersion.V1);
if (GROUP_ROWS > 0) pb = pb.setMaxRowGroupSize(GROUP_ROWS);
const props = pb.build();
if (JSONL) writeFileSync(JSONL, ids.map((a, r) => JSON.stringify({ input_ids: a, text: text[r] })).join('\n') + '\n');
writeFileSync(out, pw.writeParquet(pw.Table.fromIPCStream(arrow.tableToIPC(t, 'stream')), props));
