# pagein inspect on Parquet files written by npm parquet-wasm (the Rust
# parquet crate) (tests/data/parquet/fixtures, committed): schema, row groups, codecs,
# encodings in text and --json; malformed footers exit 1 naming the file.
. "$REPO/tests/cli/lib.sh"
FX=$REPO/tests/data/parquet/fixtures # committed (tests/data/regen.sh)

expect_exit 0 "$PAGEIN" inspect "$FX/small_groups.parquet"
expect_contains "format:      parquet"
expect_contains "rows:        1000 in 11 row groups"
expect_contains "ids.list.item"
expect_contains "ZSTD"
expect_contains "(page index)"

# a Parquet file under another name is recognised by its magic
cp "$FX/encodings_v2.parquet" "$TMP/data.bin"
expect_exit 0 "$PAGEIN" inspect --json "$TMP/data.bin"
echo "$OUT_TXT" > "$TMP/out.json"
$PY - "$TMP/out.json" <<'PYEOF' || fail "inspect --json of a Parquet file"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["num_rows"] == 1000, j["num_rows"]
cols = {c["path"]: c for c in j["columns"]}
assert cols["ids.list.item"]["kind"] == "list" and cols["ids.list.item"]["field"] == "ids"
assert cols["s"]["logical"] == "STRING"
enc = {e for g in j["row_groups"] for c in g["chunks"] for e in c["encodings"]}
assert {"DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY", "BYTE_STREAM_SPLIT"} <= enc, enc
assert all(c["codec"] == "SNAPPY" for g in j["row_groups"] for c in g["chunks"])
assert sum(g["num_rows"] for g in j["row_groups"]) == 1000
PYEOF

# malformed: a footer length past the file, no magic at the end
printf 'PAR1xxxxxxxxxxxxPAR1' > "$TMP/bad.parquet"
expect_exit 1 "$PAGEIN" inspect "$TMP/bad.parquet"
expect_contains "bad.parquet"
expect_contains "footer of"
head -c 1000 "$FX/small_groups.parquet" > "$TMP/cut.parquet"
expect_exit 1 "$PAGEIN" inspect "$TMP/cut.parquet"
expect_contains "cut.parquet"
