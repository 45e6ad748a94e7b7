// gen.mjs - Parquet fixtures written by DuckDB (npm @duckdb/node-api, `COPY ... TO
// 'x.parquet'`), a writer nobody here wrote, for python/tests/test_nested.py:
//   chat.parquet  id, messages: list<struct<role, content>> (as ultrachat_200k),
//                 with null and empty lists, null elements and null contents
//   map.parquet   id, attrs: map<varchar, integer>, tags: map<integer, list<varchar>>,
//                 with null and empty maps and null values
// 3 row groups each. The expected values are DuckDB's own read-back of each
// written file (read_parquet, one thread, file order), as canonical JSON per row
// (bench/corpus_ref.mjs's form: integers as strings, a map as [[key, value], ...]):
// chat.parquet.jsonl, map.parquet.jsonl. The tests need neither node nor npm.
// usage: NODE_PATH=build/npm/node_modules node tests/data/duckdb/gen.mjs OUTDIR
import { createRequire } from 'module';
import { writeFileSync } from 'fs';
import path from 'path';
const require = createRequire(import.meta.url);
const { DuckDBInstance } = require('@duckdb/node-api');
const out = path.resolve(process.argv[2]);
const inst = await DuckDBInstance.create(':memory:', { threads: '1' });
const con = await inst.connect();
await con.run(`CREATE TABLE chat AS SELECT i::INTEGER AS id,
  CASE WHEN i % 17 = 5 THEN NULL WHEN i % 13 = 4 THEN []::STRUCT(role VARCHAR, content VARCHAR)[]
       ELSE list_transform(range((i % 5) + 1), k -> CASE WHEN i % 11 = 3 AND k = 1 THEN NULL
            ELSE {'role': CASE WHEN k % 2 = 0 THEN 'user' ELSE 'assistant' END,
                  'content': CASE WHEN i % 9 = 7 THEN NULL ELSE 'turn ' || k || ' of ' || i || ': ' || repeat('δ', (i * k) % 7) END} END)
  END AS messages FROM range(120) r(i) ORDER BY i`);
await con.run(`CREATE TABLE maps AS SELECT i::INTEGER AS id,
  CASE WHEN i % 7 = 2 THEN NULL WHEN i % 10 = 6 THEN MAP {}::MAP(VARCHAR, INTEGER)
       ELSE map_from_entries(list_transform(range((i % 4) + 1), k -> {'key': 'k' || k, 'value': CASE WHEN i % 5 = 1 THEN NULL ELSE (i * 31 + k)::INTEGER END}))
  END AS attrs,
  CASE WHEN i % 6 = 0 THEN NULL
       ELSE map_from_entries(list_transform(range(i % 3), k -> {'key': (k * 100 - i)::INTEGER, 'value': CASE WHEN k = 1 THEN NULL ELSE ['x' || i, 'y' || k] END}))
  END AS tags FROM range(120) r(i) ORDER BY i`);
for (const [table, file] of [['chat', 'chat.parquet'], ['maps', 'map.parquet']]) {
  const p = path.join(out, file);
  await con.run(`COPY ${table} TO '${p}' (FORMAT PARQUET, ROW_GROUP_SIZE 50, COMPRESSION SNAPPY)`);
  const r = await con.runAndReadAll(`SELECT * FROM read_parquet('${p}')`);
  const canon = (v) => v === null ? null : Array.isArray(v) ? v.map(canon)
    : typeof v === 'object' ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, canon(x)]))
    : typeof v === 'number' || typeof v === 'bigint' ? String(v) : v;
  // getRowObjectsJson: a map as [{key, value}]; canonical: [[key, value]]
  const cols = r.columnNames(), types = r.columnTypes();
  const lines = r.getRowObjectsJson().map(row => JSON.stringify(Object.fromEntries(cols.map((c, j) => {
    const v = row[c];
    if (v !== null && String(types[j]).startsWith('MAP')) return [c, v.map(e => [canon(e.key), canon(e.value)])];
    return [c, canon(v)];
  }))));
  writeFileSync(p + '.jsonl', lines.join('\n') + '\n');
}
