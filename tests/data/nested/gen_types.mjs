// gen_types.mjs - the committed Arrow IPC fixtures of python/tests/test_nested.py
// for dictionary-encoded columns (with delta dictionary batches), Decimal256,
// Interval (YEAR_MONTH, DAY_TIME), sparse and dense unions, written by npm
// apache-arrow (a writer nobody here wrote): types.arrows (stream),
// types.arrow (file). (dupnames.arrows, two fields of one name, is
// apache/arrow-testing's generated_duplicate_fieldnames.stream, written by
// Arrow C++: apache-arrow cannot write such a schema.) The expected
// values are apache-arrow's own read-back, canonical JSON per row
// (bench/corpus_ref.mjs): types.arrows.jsonl, types.arrow.jsonl.
// usage: NODE_PATH=build/npm/node_modules node tests/data/nested/gen_types.mjs OUTDIR
import { createRequire } from 'module';
import { writeFileSync } from 'fs';
import { execFileSync } from 'child_process';
import { fileURLToPath } from 'url';
import path from 'path';
const require = createRequire(import.meta.url);
const A = require('apache-arrow');
const out = process.argv[2];
const ROWS = 40, CHUNK = 12; // 4 record batches: the dictionary grows in 3 deltas
const f = (n, t, nullable = true) => new A.Field(n, t, nullable);
const chunked = (type, vals, opts = {}) => { // one builder, flushed every CHUNK values
  const b = A.makeBuilder({ type, nullValues: [null, undefined], ...opts });
  const chunks = [];
  vals.forEach((v, i) => { b.append(v); if (i % CHUNK === CHUNK - 1) chunks.push(b.flush()); });
  chunks.push(b.finish().flush());
  return new A.Vector(chunks.filter(c => c.length));
};
const rows = [...Array(ROWS).keys()];
const tags = ['red', 'green', 'blue', 'cyan', 'magenta', 'yellow', 'black', 'white'];
const word = (r) => tags[(r * 5) % Math.min(tags.length, 2 + Math.floor(r / 6))];
const w256 = (r) => { const w = new Uint32Array(8); w[0] = (r * 2654435761) >>> 0; w[1] = r * 7; w[5] = r % 3 ? 0 : 0x1234;
  if (r % 4 === 1) for (let k = 0; k < 8; k++) w[k] = ~w[k] >>> 0; return w; };
const vecs = {
  tag: chunked(new A.Dictionary(new A.Utf8(), new A.Int32(), 1), rows.map(r => r % 9 === 4 ? null : word(r))),
  small: chunked(new A.Dictionary(new A.Int64(), new A.Uint8(), 2), rows.map(r => r % 7 === 6 ? null : BigInt((r % 5) * 1000 - 2000))),
  d256: chunked(new A.Decimal(3, 60, 256), rows.map(r => r % 6 === 2 ? null : w256(r))),
  ym: chunked(new A.IntervalYearMonth(), rows.map(r => r % 5 === 3 ? null : new Int32Array([r - 20, r % 12]))),
  dt: chunked(new A.IntervalDayTime(), rows.map(r => r % 5 === 4 ? null : new Int32Array([r * 3 - 50, r * 86399 % 86400000]))),
  du: chunked(new A.DenseUnion([5, 9], [f('int', new A.Int32()), f('txt', new A.Utf8())]),
    rows.map(r => r % 4 ? r * 11 - 100 : 't' + r), { valueToChildTypeId: (b, v) => (typeof v === 'number' ? 5 : 9) }),
};
// a sparse union, its members as long as it (apache-arrow's builder leaves them short)
const suType = new A.SparseUnion([0, 1], [f('num', new A.Float64()), f('str', new A.Utf8())]);
const num = A.vectorFromArray(rows.map(r => (r % 3 ? r / 4 : null)), new A.Float64());
const str = A.vectorFromArray(rows.map(r => (r % 3 ? null : (r % 6 ? null : 's' + r))), new A.Utf8());
vecs.su = A.makeVector(A.makeData({ type: suType, length: ROWS, nullCount: 0,
  typeIds: Int8Array.from(rows, r => (r % 3 ? 0 : 1)), children: [num.data[0], str.data[0]] }));
const table = new A.Table(vecs);
writeFileSync(path.join(out, 'types.arrows'), A.tableToIPC(table, 'stream'));
writeFileSync(path.join(out, 'types.arrow'), A.tableToIPC(table, 'file'));
const ref = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'bench', 'corpus_ref.mjs');
for (const file of ['types.arrows', 'types.arrow'])
  writeFileSync(path.join(out, file + '.jsonl'), execFileSync('node', [ref, 'arrow', path.join(out, file)], { env: process.env }));
