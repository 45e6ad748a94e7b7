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
// "Ne-S"), timestamps (milliseconds since the epoch, floored), dates (days), times
// (microseconds) as decimal strings; binaries as hex; strings as they are;
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
    case T.Decimal: return String(v) + 'e' + String(-t.scale);
    case T.Utf8: case T.LargeUtf8: case T.Utf8View: return v;
    case T.Binary: case T.LargeBinary: case T.FixedSizeBinary: case T.BinaryView: return hex(v);
    case T.Date: return String(Math.round(Number(v) / 86400000));
    case T.Timestamp: return String(Math.floor(Number(v)));
    case T.Time: { const mul = [1e6, 1e3, 1, 1e-3][t.unit]; return String(Math.floor(Number(v) * mul)); }
    case T.Duration: return String(v);
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
const fields = table.schema.fields;
for (let i = 0; i < table.numRows; i++) {
  const row = {};
  fields.forEach((f, j) => { row[f.name] = canon(f.type, table.getChildAt(j).get(i)); });
  process.stdout.write(JSON.stringify(row) + '\n');
}
