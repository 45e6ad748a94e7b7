// gen.mjs - writes the Parquet fixtures of tests/test_parquet.c with writers
// nobody here wrote: npm apache-arrow builds the table, npm parquet-wasm (the
// Rust parquet crate compiled to WebAssembly) writes it with every codec,
// data page v1 and v2, dictionary on and off, the non-default encodings the
// writer offers, many small row groups and many small pages. The values go
// to expected.json, each written as canonical text (see canon() below) so
// the C test compares text: ints in decimal, floats as the hex of their IEEE
// bits, booleans true/false, strings and binaries as hex of their bytes,
// lists as arrays, null as null; a struct's members are columns "st.a".
//
// usage: [TOK_MAX=8] NODE_PATH=build/npm/node_modules node gen.mjs OUTDIR [ROWS]
import { createRequire } from 'module';
import { writeFileSync, mkdirSync } from 'fs';
const require = createRequire(import.meta.url);
const arrow = require('apache-arrow');
const pw = require('parquet-wasm/node');

const out = process.argv[2];
const ROWS = Number(process.argv[3] || 1000);
// token lists of 0..TOK_MAX ids (short by default: the files are committed)
const TOK_MAX = Number(process.env.TOK_MAX || 8);
mkdirSync(out, { recursive: true });

let seed = 12345;
// mulberry32: 32-bit integer arithmetic (a float LCG loses bits past 2^53 and cycles)
const rnd = () => { seed = (seed + 0x6D2B79F5) | 0; let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t; return ((t ^ (t >>> 14)) >>> 0) / 4294967296; };
const rint = (lo, hi) => lo + Math.floor(rnd() * (hi - lo + 1));
const vocab = ['alpha', 'beta', 'gamma', 'δέλτα', '', 'a somewhat longer token string', '日本語', 'x'];

const cols = { i32: [], i64: [], f32: [], f64: [], b: [], s: [], bin: [], fx: [], ids: [], tags: [], st: [], ts: [], tok: [] };
for (let r = 0; r < ROWS; r++) {
  cols.i32.push(r % 7 === 3 ? null : rint(-2147483648, 2147483647));
  cols.i64.push(r % 5 === 1 ? null : BigInt(rint(-1e9, 1e9)) * 1000003n + BigInt(r));
  cols.f32.push(Math.fround((rnd() - 0.5) * 1e6));
  cols.f64.push(r % 11 === 4 ? null : (rnd() - 0.5) * 1e12);
  cols.b.push(r % 3 === 2 ? null : rnd() < 0.5);
  cols.s.push(r % 13 === 5 ? null : (r % 4 === 0 ? 'row' + r : vocab[rint(0, vocab.length - 1)]));
  cols.bin.push(r % 17 === 9 ? null : Uint8Array.from({ length: rint(0, 20) }, () => rint(0, 255)));
  cols.fx.push(r % 10 === 0 ? null : Uint8Array.from({ length: 3 }, () => rint(0, 255)));
  if (r % 9 === 4) cols.ids.push(null);
  else cols.ids.push(Array.from({ length: rint(0, 6) }, () => (rnd() < 0.1 ? null : rint(-1000, 100000))));
  cols.tags.push(Array.from({ length: rint(0, 3) }, () => vocab[rint(0, vocab.length - 1)]));
  cols.st.push(r % 6 === 0 ? null : { a: r % 4 === 1 ? null : r * 3, b: vocab[r % vocab.length] });
  cols.ts.push(BigInt(1700000000000 + r * 1000));
  cols.tok.push(Array.from({ length: rint(0, TOK_MAX) }, () => rint(0, 50000))); // token ids: never null
}

const T = arrow;
const f = (n, t, nullable = true) => new T.Field(n, t, nullable);
const types = {
  i32: new T.Int32(), i64: new T.Int64(), f32: new T.Float32(), f64: new T.Float64(), b: new T.Bool(),
  s: new T.Utf8(), bin: new T.Binary(), fx: new T.FixedSizeBinary(3),
  ids: new T.List(f('item', new T.Int32())), tags: new T.List(f('item', new T.Utf8(), false)),
  st: new T.Struct([f('a', new T.Int32()), f('b', new T.Utf8())]),
  ts: new T.TimestampMillisecond(),
  tok: new T.List(f('item', new T.Int32(), false)),
};
const vecs = {};
for (const k of Object.keys(cols)) vecs[k] = T.vectorFromArray(cols[k], types[k]);
const table = new T.Table(vecs);
const ipc = T.tableToIPC(table, 'stream');

// ---- canonical text ----
const hex = (u8) => Buffer.from(u8).toString('hex');
const f32hex = (x) => { const d = new DataView(new ArrayBuffer(4)); d.setFloat32(0, x, true); return '0x' + d.getUint32(0, true).toString(16).padStart(8, '0'); };
const f64hex = (x) => { const d = new DataView(new ArrayBuffer(8)); d.setFloat64(0, x, true); return '0x' + d.getBigUint64(0, true).toString(16).padStart(16, '0'); };
const utf8 = (s) => hex(new TextEncoder().encode(s));
const canon = {
  i32: (v) => String(v), i64: (v) => String(v), f32: f32hex, f64: f64hex, b: (v) => String(v),
  s: utf8, bin: hex, fx: hex, ids: (v) => v.map((x) => (x === null ? null : String(x))), tags: (v) => v.map(utf8),
  ts: (v) => String(v), tok: (v) => v.map(String),
};
const expected = { rows: ROWS, columns: {} };
for (const k of Object.keys(canon)) expected.columns[k] = cols[k].map((v) => (v === null ? null : canon[k](v)));
expected.columns['st.a'] = cols.st.map((v) => (v === null || v.a === null ? null : String(v.a)));
expected.columns['st.b'] = cols.st.map((v) => (v === null ? null : utf8(v.b)));
writeFileSync(`${out}/expected.json`, JSON.stringify(expected));

// ---- the files ----
const files = [];
function write(name, build) {
  let b = new pw.WriterPropertiesBuilder();
  b = build(b);
  const bytes = pw.writeParquet(pw.Table.fromIPCStream(ipc), b.build());
  writeFileSync(`${out}/${name}.parquet`, bytes);
  files.push(name);
}
const codecs = ['UNCOMPRESSED', 'SNAPPY', 'GZIP', 'BROTLI', 'LZ4', 'ZSTD', 'LZ4_RAW'];
for (const c of codecs)
  for (const v of ['V1', 'V2'])
    for (const d of [true, false])
      write(`${c.toLowerCase()}_${v.toLowerCase()}_${d ? 'dict' : 'plain'}`, (b) =>
        b.setCompression(pw.Compression[c]).setWriterVersion(pw.WriterVersion[v]).setDictionaryEnabled(d));
// the encodings the Rust writer offers beside PLAIN and dictionaries
for (const v of ['V1', 'V2'])
  write(`encodings_${v.toLowerCase()}`, (b) => b.setWriterVersion(pw.WriterVersion[v]).setDictionaryEnabled(false)
    .setCompression(pw.Compression.SNAPPY)
    .setColumnEncoding('i32', pw.Encoding.DELTA_BINARY_PACKED)
    .setColumnEncoding('i64', pw.Encoding.DELTA_BINARY_PACKED)
    .setColumnEncoding('ts', pw.Encoding.DELTA_BINARY_PACKED)
    .setColumnEncoding('s', pw.Encoding.DELTA_LENGTH_BYTE_ARRAY)
    .setColumnEncoding('bin', pw.Encoding.DELTA_BYTE_ARRAY)
    .setColumnEncoding('tags.list.item', pw.Encoding.DELTA_BYTE_ARRAY)
    .setColumnEncoding('st.b', pw.Encoding.DELTA_LENGTH_BYTE_ARRAY)
    .setColumnEncoding('ids.list.item', pw.Encoding.DELTA_BINARY_PACKED)
    .setColumnEncoding('f32', pw.Encoding.BYTE_STREAM_SPLIT)
    .setColumnEncoding('f64', pw.Encoding.BYTE_STREAM_SPLIT)
    .setColumnEncoding('fx', pw.Encoding.BYTE_STREAM_SPLIT)
    .setColumnEncoding('b', pw.Encoding.RLE));
// many small row groups and many small pages, with page-level statistics
// (the column and offset indexes)
write('small_groups', (b) => b.setMaxRowGroupSize(97).setCompression(pw.Compression.ZSTD)
  .setStatisticsEnabled(pw.EnabledStatistics.Page));
write('small_pages', (b) => b.setDataPageSizeLimit(256).setWriteBatchSize(32).setDictionaryPageSizeLimit(256)
  .setCompression(pw.Compression.SNAPPY).setStatisticsEnabled(pw.EnabledStatistics.Page));
write('small_pages_v2', (b) => b.setDataPageSizeLimit(256).setWriteBatchSize(32).setWriterVersion(pw.WriterVersion.V2)
  .setCompression(pw.Compression.GZIP).setStatisticsEnabled(pw.EnabledStatistics.None));
writeFileSync(`${out}/files.txt`, files.join('\n') + '\n');
console.log(`wrote ${files.length} files of ${ROWS} rows to ${out}`);
