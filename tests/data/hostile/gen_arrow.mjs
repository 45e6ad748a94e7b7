// gen_arrow.mjs OUTDIR - the hostile Arrow files of tests/data/hostile (see
// gen.py), written by npm apache-arrow (resolved from build/npm, as
// tests/data/arrow/gen.mjs does; tests/data/arrow/fixtures.sh installs it):
//   arrow_null.arrow      a valid IPC file: one Null column of 2^28 rows (no buffers)
//   wide.parquet          257 int32 columns of 3 rows (npm parquet-wasm)
//   tiny_groups.parquet   1,000 int32 rows in row groups of 2 (parquet-wasm)
//   arrow_len.stream.arrow  a stream of 3 batches of 128 int32 rows, the last
//                         batch's length field set to 2^30 (one byte changed)
import { createRequire } from 'node:module';
import { writeFileSync } from 'node:fs';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(resolve(process.env.ARROW_NPM || join(here, '../../../build/npm'), 'package.json'));
const A = require('apache-arrow');
const out = process.argv[2];

const nul = A.makeData({ type: new A.Null(), length: 2 ** 28 });
const t1 = new A.Table({ n: A.makeVector(nul) });
writeFileSync(join(out, 'arrow_null.arrow'), A.tableToIPC(t1, 'file'));

const batches = [0, 1, 2].map((b) => {
  const v = Int32Array.from({ length: 128 }, (_, i) => b * 128 + i);
  return new A.RecordBatch({ x: A.makeData({ type: new A.Int32(), data: v }) });
});
const s = Buffer.from(A.tableToIPC(new A.Table(batches), 'stream'));
// the last message's metadata (before its 512-byte body and the 8-byte end
// of stream): RecordBatch.length is the int64 128 before the FieldNode's
const end = s.length - 8 - 128 * 4;
const start = s.lastIndexOf(Buffer.from([0xff, 0xff, 0xff, 0xff]), end);
const want = Buffer.from([128, 0, 0, 0, 0, 0, 0, 0]);
const at = s.indexOf(want, start);
if (start < 0 || at < 0 || at >= end) throw new Error('no batch length found');
s[at] = 0; s[at + 3] = 0x40;
writeFileSync(join(out, 'arrow_len.stream.arrow'), s);

// wide.parquet: 257 int32 columns of 3 rows, by npm parquet-wasm (when it
// is installed beside apache-arrow: tests/data/parquet/gen.sh): more fields
// than the pipeline's old fixed 256 and fewer than the limit at open
let pw = null;
try { pw = require('parquet-wasm/node'); } catch (e) { console.log('parquet-wasm missing: wide.parquet not written'); }
if (pw) {
  const cols = {};
  for (let c = 0; c < 257; c++) cols['c' + c] = A.makeVector(Int32Array.from([c, 1000 + c, 2000 + c]));
  const ipc = A.tableToIPC(new A.Table(cols), 'stream');
  const bytes = pw.writeParquet(pw.Table.fromIPCStream(ipc), new pw.WriterPropertiesBuilder().build());
  writeFileSync(join(out, 'wide.parquet'), bytes);
}

// tiny_groups.parquet: 1,000 int32 rows in row groups of 2 (parquet-wasm):
// the block order's units are many tiny spans
if (pw) {
  const t = new A.Table({ x: A.makeVector(Int32Array.from({ length: 1000 }, (_, i) => i)) });
  const props = new pw.WriterPropertiesBuilder().setMaxRowGroupSize(2).build();
  writeFileSync(join(out, 'tiny_groups.parquet'), pw.writeParquet(pw.Table.fromIPCStream(A.tableToIPC(t, 'stream')), props));
}
