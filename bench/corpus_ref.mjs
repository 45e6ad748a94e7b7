// corpus_ref.mjs - reference values of Parquet or Arrow IPC files for
// bench/corpus.sh: npm parquet-wasm (the Rust parquet crate) reads a Parquet
// file into Arrow, npm apache-arrow reads Arrow IPC files and streams; every
// row is printed as canonical JSON (one line per row, see canon()), the same
// canonical form bench/corpus_pagein.py writes for pagein's rows.
// usage: NODE_PATH=build/npm/node_modules node corpus_ref.mjs parquet|arrow FILE
import { createRequire } from 'module';
import { readFileSync } from 'fs';
const require = createRequire(import.meta.url);
const A = require('apache-arrow');
const [kind, file] = process.argv.slice(2);
const bytes = new Uint8Array(readFileSync(file));
let table;
if (kind === 'parquet') {
  const pw = require('parquet-wasm/node');
  table = A.tableFromIPC(pw.readParquet(bytes).intoIPCStream());
} else {
  table = A.tableFromIPC(bytes);
}
const T = A.Type;
const dv = new DataView(new ArrayBuffer(8));
const hex = (u8) => Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength).toString('hex');
// floats: the bits of the double (NaN as "NaN"); integers, decimals (unscaled
// "Ne-S"), timestamps (milliseconds since the epoch, floored), dates (days; a
// Date64 in milliseconds), times and durations (microseconds) as decimal strings; binaries as hex; strings as they are;
// lists as arrays, structs as objects, maps as arrays of [key, value]
function canon(t, v) {
  if (v === null || v === undefined) return null;
  switch (t.typeId) {
    case T.Null: return null;
    case T.Bool: return !!v;
    case T.Int: return String(v);
    case T.Float: {
      if (Number.isNaN(v)) return 'NaN';
      dv.setFloat64(0, v, true);
      return dv.getBigUint64(0, true).toString(16).padStart(16, '0');
    }
    case T.Decimal: { // the unscaled two's complement integer from its 32-bit words (String() of a 256-bit one is wrong)
      const w = v instanceof Uint32Array ? v : new Uint32Array(v.buffer, v.byteOffset, v.byteLength / 4);
      let n = 0n;
      for (let k = w.length - 1; k >= 0; k--) n = (n << 32n) | BigInt(w[k]);
      if (w.length && (w[w.length - 1] & 0x80000000)) n -= 1n << BigInt(32 * w.length);
      return String(n) + 'e' + String(-t.scale);
    }
    case T.Utf8: case T.LargeUtf8: case T.Utf8View: return v;
    case T.Binary: case T.LargeBinary: case T.FixedSizeBinary: case T.BinaryView: return hex(v);
    case T.Date: return t.unit === 0 ? String(Math.round(Number(v) / 86400000)) : String(Math.floor(Number(v))); // days, or Date64's ms
    case T.Timestamp: return String(Math.floor(Number(v)));
    case T.Time: { const mul = [1e6, 1e3, 1, 1e-3][t.unit]; return String(Math.floor(Number(v) * mul)); }
    case T.Duration: { // microseconds, floored, like Time
      const b = BigInt(v), m = [1000000n, 1000n, 1n, 1n][t.unit];
      if (t.unit !== 3) return String(b * m);
      const q = b / 1000n;
      return String(b < 0n && q * 1000n !== b ? q - 1n : q);
    }
    case T.Interval: { // a struct of its members (YEAR_MONTH as months)
      if (t.unit === 0) return { months: String(v.length > 1 ? v[0] * 12 + v[1] : v[0]) };
      if (t.unit === 1) return { days: String(v[0]), milliseconds: String(v[1]) };
      const dv2 = new DataView(v.buffer, v.byteOffset, 16);
      return { months: String(dv2.getInt32(0, true)), days: String(dv2.getInt32(4, true)), nanoseconds: String(dv2.getBigInt64(8, true)) };
    }
    case T.List: case T.LargeList: case T.FixedSizeList: {
      const c = t.children[0].type, out = [];
      for (let i = 0; i < v.length; i++) out.push(canon(c, v.get(i)));
      return out;
    }
    case T.Struct: {
      const o = {};
      for (const f of t.children) o[f.name] = canon(f.type, v[f.name]);
      return o;
    }
    case T.Map: {
      const e = t.children[0].type, kt = e.children[0].type, vt = e.children[1] ? e.children[1].type : null, out = [];
      for (const [k, x] of v) out.push([canon(kt, k), vt ? canon(vt, x) : null]);
      return out;
    }
    case T.Dictionary: return canon(t.dictionary, v);
    default: return 'unsupported:' + String(t);
  }
}
// a top-level union's value: its member's, read from the member's data
// (the vector's own get() of a dense union is wrong in apache-arrow 21)
function unionAt(col, t, i) {
  let k = i;
  for (const d of col.data) {
    if (k < d.length) {
      const ci = t.typeIdToChildIndex[d.typeIds[k]];
      const off = d.valueOffsets ? d.valueOffsets[k] : k;
      return canon(t.children[ci].type, A.makeVector(d.children[ci]).get(off));
    }
    k -= d.length;
  }
  return null;
}
const fields = table.schema.fields;
for (let i = 0; i < table.numRows; i++) {
  const row = {};
  fields.forEach((f, j) => {
    const col = table.getChildAt(j);
    row[f.name] = f.type.typeId === T.Union || f.type.typeId === T.DenseUnion || f.type.typeId === T.SparseUnion
      ? unionAt(col, f.type, i) : canon(f.type, col.get(i));
  });
  process.stdout.write(JSON.stringify(row) + '\n');
}
