// chat_gen.mjs - a chat-shaped Parquet file for the nested-decode benchmark:
// ROWS rows of messages: list<struct<role: utf8, content: utf8>> (2 to 6
// turns, about 1 KB a row), written by npm parquet-wasm (SNAPPY, row groups
// of 10,000).  usage: NODE_PATH=build/npm/node_modules node chat_gen.mjs OUT ROWS
import { createRequire } from 'module';
import { writeFileSync } from 'fs';
const require = createRequire(import.meta.url);
const A = require('apache-arrow');
const pw = require('parquet-wasm/node');
const [out, rowsArg] = process.argv.slice(2);
const ROWS = Number(rowsArg || 200000);
let seed = 3;
const rnd = () => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed / 0x7fffffff; };
const lorem = 'the quick brown fox jumps over the lazy dog and keeps running through the field while '.repeat(8);
const T = new A.List(new A.Field('item', new A.Struct([new A.Field('role', new A.Utf8()), new A.Field('content', new A.Utf8())])));
const batches = [];
for (let s = 0; s < ROWS; s += 10000) {
  const msgs = [];
  for (let r = s; r < Math.min(ROWS, s + 10000); r++) {
    const n = 2 + Math.floor(rnd() * 5), m = [];
    for (let k = 0; k < n; k++) {
      const len = 60 + Math.floor(rnd() * 300), at = Math.floor(rnd() * 300);
      m.push({ role: k % 2 ? 'assistant' : 'user', content: r + ': ' + lorem.slice(at, at + len) });
    }
    msgs.push(m);
  }
  batches.push(new A.Table({ messages: A.vectorFromArray(msgs, T) }));
}
const table = batches.reduce((a, b) => a.concat(b));
const props = new pw.WriterPropertiesBuilder().setCompression(pw.Compression.SNAPPY).setMaxRowGroupSize(10000).build();
writeFileSync(out, pw.writeParquet(pw.Table.fromIPCStream(A.tableToIPC(table, 'stream')), props));
