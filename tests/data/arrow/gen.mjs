// gen.mjs - writes the Arrow IPC fixtures of tests/test_arrow.c with npm
// apache-arrow (a writer nobody here wrote), and beside each table the
// expected value of every cell as text, rendered from the *input* values:
//
//   node gen.mjs OUTDIR        (apache-arrow resolved from build/npm)
//
// OUTDIR/types.{stream,file}.arrow      every type the Hugging Face `datasets`
//                                        library writes, nulls, nesting, 4 batches
// OUTDIR/types.expected.tsv             "batch<TAB>column<TAB>row<TAB>value"
// OUTDIR/types.{lz4,zstd}.{stream,file}.arrow   the same table with compressed
//        bodies: apache-arrow's writer frames the buffers; the bytes come from
//        Debian's lz4 / zstd programs (see fixPrefixes below)
// OUTDIR/types.lz4js.stream.arrow       the writer's compressed output as is
// OUTDIR/dict.stream.arrow              a dictionary-encoded column
// OUTDIR/ds/                            a `save_to_disk`-like directory
// OUTDIR/seed/                          small copies: the fuzz seed corpus
//
// Value text (the C test renders decoded cells the same way): integers in
// decimal, floats as C's %.17g would print them (only dyadic values are
// used, so JS's String() agrees), true/false, null, strings "s:" + UTF-8
// hex, binary "b:" + hex, lists "[a,b]", structs "{x=a,y=b}".
import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(resolve(process.env.ARROW_NPM || join(here, '../../../build/npm'), 'package.json'));
const A = require('apache-arrow');
// node gen.mjs --bench OUTDIR ROWS: only OUTDIR/bench.arrow, a `datasets`-like
// stream (text ~300 bytes, input_ids list<int32> of 32..160, label int64) in
// record batches of 1,000 rows, for bench/arrow_shuffle.sh.
const benchMode = process.argv[2] === '--bench';
const out = process.argv[benchMode ? 3 : 2];
if (!out) { console.error('usage: node gen.mjs [--bench] OUTDIR [ROWS]'); process.exit(2); }
mkdirSync(out, { recursive: true });
if (benchMode) {
  const rows = Number(process.argv[4] || 100000);
  const schema = new A.Schema([new A.Field('text', new A.Utf8(), true),
    new A.Field('input_ids', new A.List(new A.Field('item', new A.Int32(), true)), true),
    new A.Field('label', new A.Int64(), true)]);
  const words = 'the of and to in is was for on that with as by at from his it an were are which this be'.split(' ');
  let seed = 12345;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 4294967296);
  const batches = [];
  for (let r0 = 0; r0 < rows; r0 += 1000) {
    const n = Math.min(1000, rows - r0), text = [], ids = [], label = [];
    for (let i = 0; i < n; i++) {
      let t = `row ${r0 + i}:`;
      while (t.length < 150 + rnd() * 300) t += ' ' + words[Math.floor(rnd() * words.length)];
      text.push(t);
      ids.push(Int32Array.from({ length: 32 + Math.floor(rnd() * 128) }, () => Math.floor(rnd() * 50000)));
      label.push(BigInt(i % 5));
    }
    const children = [A.vectorFromArray(text, new A.Utf8()).data[0],
      A.vectorFromArray(ids, schema.fields[1].type).data[0], A.vectorFromArray(label, new A.Int64()).data[0]];
    batches.push(new A.RecordBatch(schema, A.makeData({ type: new A.Struct(schema.fields), length: n, nullCount: 0, children })));
  }
  writeFileSync(join(out, 'bench.arrow'), A.tableToIPC(new A.Table(schema, batches), 'stream'));
  process.exit(0);
}

const hex = (u8) => Buffer.from(u8).toString('hex');
function render(type, v) {
  if (v === null || v === undefined) return 'null';
  switch (type.typeId) {
    case A.Type.Null: return 'null';
    case A.Type.Bool: return v ? 'true' : 'false';
    case A.Type.Int: case A.Type.Float: return String(v);
    case A.Type.Utf8: case A.Type.LargeUtf8: return 's:' + hex(Buffer.from(v, 'utf8'));
    case A.Type.Binary: case A.Type.LargeBinary: return 'b:' + hex(v);
    case A.Type.List: case A.Type.LargeList: case A.Type.FixedSizeList:
      return '[' + v.map((x) => render(type.children[0].type, x)).join(',') + ']';
    case A.Type.Struct:
      return '{' + type.children.map((f) => f.name + '=' + render(f.type, v[f.name])).join(',') + '}';
    default: throw new Error('render: type ' + type);
  }
}

// ---- the columns: name, type, value of global row r (null where r says so)
const F = (name, type, nullable = true) => new A.Field(name, type, nullable);
const N = (k, f) => (r) => (r % k === k - 1 ? null : f(r)); // every k-th row null
const str = (r) => ['', 'a', 'héllo', 'naïve ✓', 'x'.repeat(r % 40), '日本語', 'tab\tnl\n'][r % 7];
const cols = [
  [F('i8', new A.Int8()), N(4, (r) => [-128, 127, 0, -1, 5][r % 5])],
  [F('i16', new A.Int16()), N(5, (r) => [-32768, 32767, 300, -7][r % 4])],
  [F('i32', new A.Int32(), false), (r) => [-2147483648, 2147483647, r * 1000, -r][r % 4]],
  [F('i64', new A.Int64()), N(3, (r) => [-9223372036854775808n, 9223372036854775807n, BigInt(r) * 1000000007n][r % 3])],
  [F('u8', new A.Uint8()), N(6, (r) => [0, 255, r % 256][r % 3])],
  [F('u16', new A.Uint16()), (r) => [0, 65535, r][r % 3]],
  [F('u32', new A.Uint32()), N(7, (r) => [0, 4294967295, r * 7][r % 3])],
  [F('u64', new A.Uint64()), N(2, (r) => [0n, 18446744073709551615n, BigInt(r) << 40n][r % 3])],
  [F('f16', new A.Float16()), N(5, (r) => [1.5, -2, 0.25, 65504, r][r % 5])],
  [F('f32', new A.Float32()), N(4, (r) => [r * 0.25 - 3, 1048576.5, -0.125][r % 3])],
  [F('f64', new A.Float64()), N(3, (r) => [r * 0.5, -1.75e10, 2 ** -20][r % 3])],
  [F('b', new A.Bool()), N(5, (r) => (r % 3 === 0))],
  [F('s', new A.Utf8()), N(4, (r) => str(r))],
  [F('bin', new A.Binary()), N(3, (r) => Uint8Array.from({ length: r % 6 }, (_, i) => (r * 31 + i * 7) & 255))],
  [F('ls', new A.LargeUtf8()), N(5, (r) => str(r + 3))],
  [F('lb', new A.LargeBinary()), N(6, (r) => Uint8Array.from({ length: r % 4 }, (_, i) => 255 - i - r))],
  [F('fsl', new A.FixedSizeList(3, F('item', new A.Float32()))), N(4, (r) => [r, r + 0.5, (r % 3 === 1) ? null : -r])],
  [F('li', new A.List(F('item', new A.Int32()))), N(5, (r) => Array.from({ length: r % 5 }, (_, i) => (i === 2 ? null : r * 10 + i)))],
  [F('ll', new A.LargeList(F('item', new A.Int64()))), N(4, (r) => Array.from({ length: r % 3 }, (_, i) => BigInt(i - r)))],
  [F('lstr', new A.List(F('item', new A.Utf8()))), N(6, (r) => Array.from({ length: r % 4 }, (_, i) => (i === 1 ? null : str(r + i))))],
  [F('lli', new A.List(F('item', new A.List(F('item', new A.Int8()))))), N(7, (r) => Array.from({ length: r % 3 }, (_, i) => (i === 1 && r % 2 ? null : Array.from({ length: i + 1 }, (_, j) => (r + i + j) % 100))))],
  [F('st', new A.Struct([F('a', new A.Int32()), F('b', new A.Utf8()), F('c', new A.List(F('item', new A.Int16())))])),
    N(5, (r) => ({ a: r % 3 === 2 ? null : r - 50, b: str(r + 1), c: r % 4 === 3 ? null : [r, -r] }))],
  [F('n', new A.Null()), () => null],
  [F('emb', new A.FixedSizeList(4, F('item', new A.Float32()))), N(6, (r) => [r, -r, r / 4, 1])],
  [F('boxes', new A.List(F('item', new A.FixedSizeList(2, F('item', new A.Int16()))))),
    N(5, (r) => Array.from({ length: r % 3 }, (_, i) => [r + i, -(r + i)]))],
];
const schemaOf = (cs, meta) => new A.Schema(cs.map((c) => c[0]), meta);
const hfMeta = new Map([['huggingface', JSON.stringify({ info: { features: { note: 'written by tests/data/arrow/gen.mjs' } } })]]);

function table(cs, sizes, base = 0) {
  const schema = schemaOf(cs, hfMeta);
  const batches = [], expected = [];
  let r0 = base;
  sizes.forEach((n, b) => {
    const children = cs.map(([f, gen]) => {
      const vals = Array.from({ length: n }, (_, i) => { const v = gen(r0 + i); return v === undefined ? null : v; });
      vals.forEach((v, i) => expected.push([b, f.name, i, render(f.type, v)].join('\t')));
      return A.vectorFromArray(vals, f.type).data[0];
    });
    const data = A.makeData({ type: new A.Struct(schema.fields), length: n, nullCount: 0, children });
    batches.push(new A.RecordBatch(schema, data));
    r0 += n;
  });
  return { table: new A.Table(schema, batches), expected };
}

const sizes = [5, 1, 9, 4, 150];
const { table: types, expected } = table(cols, sizes);
writeFileSync(join(out, 'types.stream.arrow'), A.tableToIPC(types, 'stream'));
writeFileSync(join(out, 'types.file.arrow'), A.tableToIPC(types, 'file'));
writeFileSync(join(out, 'types.expected.tsv'), 'batch\tcolumn\trow\tvalue\n' + expected.join('\n') + '\n');

// ---- compressed bodies. apache-arrow's writer takes a codec from its
// registry; the compressed bytes come from Debian's lz4 and zstd programs.
// apache-arrow 21.2.0 writes the *compressed* length into each buffer's
// 8-byte prefix where the spec (Columnar.rst, "Compression") puts the
// uncompressed length (its own reader looks only for -1). We keep that file
// as written (a reader that trusts the prefix must refuse it), and for the
// positive fixtures replace each prefix by the true uncompressed length: the
// codec logs (uncompressed length, compressed bytes) in the order the writer
// asks, and the writer lays the buffers out in that order.
const log = [];
const codec = (prog) => ({
  encode(u8) {
    const c = new Uint8Array(execFileSync(prog, ['-c', '-q'], { input: Buffer.from(u8), maxBuffer: 1 << 28 }));
    log.push([u8.length, c]);
    return c;
  },
  decode() { throw new Error('not used'); },
});
let ncompressed = 0;
function fixPrefixes(bytes) {
  const b = Buffer.from(bytes);
  let at = 0;
  for (const [ulen, c] of log) {
    if (c.length >= ulen) continue; // the writer stored it uncompressed (-1)
    ncompressed++;
    const pre = Buffer.alloc(8);
    pre.writeBigInt64LE(BigInt(c.length));
    const needle = Buffer.concat([pre, Buffer.from(c)]);
    const pos = b.indexOf(needle, at);
    if (pos < 0) throw new Error('fixPrefixes: a compressed buffer was not found');
    b.writeBigInt64LE(BigInt(ulen), pos);
    at = pos + needle.length;
  }
  log.length = 0;
  return b;
}
for (const [name, prog, ct] of [['lz4', 'lz4', A.CompressionType.LZ4_FRAME], ['zstd', 'zstd', A.CompressionType.ZSTD]]) {
  A.compressionRegistry.set(ct, codec(prog));
  for (const kind of ['stream', 'file']) {
    const raw = A.tableToIPC(types, kind, ct);
    if (name === 'lz4' && kind === 'stream') writeFileSync(join(out, 'types.lz4js.stream.arrow'), raw);
    writeFileSync(join(out, `types.${name}.${kind}.arrow`), fixPrefixes(raw));
  }
}

// ---- small copies for the fuzz seed corpus (fuzz/corpus/arrow/ holds the
// files this wrote once): two short batches in each encoding
const seed = join(out, 'seed');
mkdirSync(seed, { recursive: true });
const { table: small } = table(cols, [3, 2]);
writeFileSync(join(seed, 'types.stream.arrow'), A.tableToIPC(small, 'stream'));
writeFileSync(join(seed, 'types.file.arrow'), A.tableToIPC(small, 'file'));
for (const [name, ct] of [['lz4', A.CompressionType.LZ4_FRAME], ['zstd', A.CompressionType.ZSTD]]) {
  writeFileSync(join(seed, `types.${name}.stream.arrow`), fixPrefixes(A.tableToIPC(small, 'stream', ct)));
  writeFileSync(join(seed, `types.${name}.file.arrow`), fixPrefixes(A.tableToIPC(small, 'file', ct)));
}

// ---- a dictionary-encoded column (refused, naming the column)
const dictVec = A.vectorFromArray(['red', 'green', 'red', null], new A.Dictionary(new A.Utf8(), new A.Int32()));
const dictTable = new A.Table({ id: A.vectorFromArray([1, 2, 3, 4], new A.Int32()), colour: dictVec });
writeFileSync(join(out, 'dict.stream.arrow'), A.tableToIPC(dictTable, 'stream'));

// ---- a save_to_disk-like directory: text + input_ids, two shards (streams)
const dsCols = [
  [F('text', new A.Utf8()), (r) => `row ${r}: ` + str(r)],
  [F('input_ids', new A.List(F('item', new A.Int32()))), (r) => Array.from({ length: 1 + (r % 6) }, (_, i) => r * 100 + i)],
  [F('label', new A.Int64()), (r) => BigInt(r % 3)],
];
const ds = join(out, 'ds');
mkdirSync(ds, { recursive: true });
const shards = [[10, 10, 3], [10, 2]];
let base = 0;
const dsExpected = [], files = [];
shards.forEach((sz, k) => {
  const { table: t, expected: e } = table(dsCols, sz, base);
  const fname = `data-${String(k).padStart(5, '0')}-of-${String(shards.length).padStart(5, '0')}.arrow`;
  writeFileSync(join(ds, fname), A.tableToIPC(t, 'stream'));
  files.push({ filename: fname });
  e.forEach((l) => dsExpected.push(fname + '\t' + l));
  base += sz.reduce((a, b) => a + b, 0);
});
writeFileSync(join(ds, 'state.json'), JSON.stringify({
  _data_files: files, _fingerprint: '0123456789abcdef', _format_columns: null, _format_kwargs: {},
  _format_type: null, _output_all_columns: false, _split: 'train',
}, null, 2) + '\n');
writeFileSync(join(ds, 'dataset_info.json'), JSON.stringify({ citation: '', description: '', features: {
  text: { dtype: 'string', _type: 'Value' }, input_ids: { feature: { dtype: 'int32', _type: 'Value' }, _type: 'Sequence' },
  label: { dtype: 'int64', _type: 'Value' } }, homepage: '', license: '' }, null, 2) + '\n');
writeFileSync(join(out, 'ds.expected.tsv'), dsExpected.join('\n') + '\n');
for (const f of ['state.json', files[1].filename]) writeFileSync(join(seed, 'ds-' + f), readFileSync(join(ds, f)));
writeFileSync(join(seed, 'dict.stream.arrow'), readFileSync(join(out, 'dict.stream.arrow')));
console.log(`gen.mjs: wrote fixtures into ${out} (${ncompressed} buffers compressed)`);
