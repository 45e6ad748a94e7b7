# pagein resident / warm / evict / lock on plain files and on a model:
# output, exit codes, the --json schema, vmtouch agreement, lock daemon.
. "$REPO/tests/cli/lib.sh"
cd "$TMP"
case $(stat -f -c %T "$TMP") in tmpfs|ramfs) echo "SKIP: $TMP is on $(stat -f -c %T "$TMP"): DONTNEED cannot drop its pages"; exit 77;; esac

# ---- usage and exit codes ----
for c in resident warm evict lock; do
  expect_exit 0 "$PAGEIN" $c --help
  expect_contains "usage: pagein $c"
  expect_exit 2 "$PAGEIN" $c
  expect_contains "no PATH"
  expect_exit 2 "$PAGEIN" $c --no-such-flag x
done
expect_exit 2 "$PAGEIN" warm --layers 3-x x
expect_exit 2 "$PAGEIN" resident -p 9-3 x
expect_exit 2 "$PAGEIN" resident --json -o kv x
expect_exit 2 "$PAGEIN" warm --tensors '(' x
expect_exit 2 "$PAGEIN" warm --daemon x

# ---- plain files ----
head -c 12000000 /dev/urandom > a.bin
head -c 3000000 /dev/urandom > b.bin
sync a.bin b.bin
expect_exit 1 "$PAGEIN" resident a.bin missing.bin   # per-file failure: others still reported
expect_contains "missing.bin"
expect_contains "a.bin"
expect_exit 0 "$PAGEIN" evict a.bin b.bin
expect_contains "after"
json() { "$PAGEIN" "$@" | $PY -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps(d))'; }
get() { $PY -c "import json,sys; d=json.loads(sys.argv[1]); print($2)" "$1"; }
J=$(json resident --json a.bin b.bin) || fail "resident --json is not JSON"
[ "$(get "$J" 'sorted(d.keys())')" = "['bytes', 'files', 'layers', 'pages', 'resident_bytes', 'resident_pages']" ] || fail "schema: $J"
[ "$(get "$J" 'sorted(d["files"][0].keys())')" = "['bytes', 'file_bytes', 'file_resident_bytes', 'pages', 'path', 'resident_bytes', 'resident_pages']" ] || fail "file schema: $J"
[ "$(get "$J" 'd["resident_bytes"]')" = 0 ] || fail "evict left pages: $J"
[ "$(get "$J" 'd["bytes"]')" = 15000000 ] || fail "bytes: $J"

# warm a byte range: at least that is resident
expect_exit 0 "$PAGEIN" warm -p 1M-3M a.bin
expect_contains "warmed 2.00 MiB"
J=$(json resident --json -p 1M-3M a.bin)
[ "$(get "$J" 'd["resident_bytes"]')" = 2097152 ] || fail "range not resident: $J"
# vmtouch agreement on pages
if command -v vmtouch >/dev/null; then
  J=$(json resident --json a.bin)
  v=$(vmtouch a.bin | awk '/Resident Pages/ {split($3, x, "/"); print x[1]}')
  [ "$(get "$J" 'd["resident_pages"]')" = "$v" ] || fail "pagein and vmtouch disagree: $J vs $v"
fi
# vmtouch flags: -t touches, -e evicts, -o kv, -v chart, -b batch, -m max size
expect_exit 0 "$PAGEIN" resident -t a.bin
expect_contains "warmed"
expect_exit 0 "$PAGEIN" resident -o kv a.bin
expect_contains "ResidentPercentage=100"
expect_exit 0 "$PAGEIN" resident -v a.bin
expect_contains "\[OOOO"
printf 'a.bin\nb.bin\n' > list
expect_exit 0 "$PAGEIN" evict -e -b list -o kv
expect_contains "Files=2 "
expect_contains "ResidentPages=0 "
expect_exit 0 "$PAGEIN" warm -m 5M -o kv a.bin b.bin   # a.bin (12 MB) skipped
expect_contains "Files=1 "
J=$(json evict --json a.bin b.bin)
[ "$(get "$J" 'd["resident_bytes_before"]')" = 3000000 ] || fail "evict before: $J"
[ "$(get "$J" 'd["resident_bytes_after"]')" = 0 ] || fail "evict after: $J"
J=$(json warm --json --threads 3 a.bin)
[ "$(get "$J" 'sorted(d.keys())')" = "['bytes', 'files', 'gb_per_s', 'resident_bytes', 'seconds']" ] || fail "warm schema: $J"
# a directory that is not a model is walked
mkdir -p d/e && cp b.bin d/e/c.bin && sync d/e/c.bin
expect_exit 0 "$PAGEIN" resident -o kv d
expect_contains "Files=1 Directories=2"

# ---- lock: daemon, wait, pidfile; locked pages survive evict ----
"$PAGEIN" evict -q a.bin
expect_exit 0 "$PAGEIN" lock --daemon --wait --pidfile "$TMP/pid" --json a.bin
pid=$(cat "$TMP/pid") || fail "no pidfile"
echo "$OUT_TXT" | $PY -m json.tool >/dev/null || fail "lock --json: $OUT_TXT"
grep -q VmLck /proc/"$pid"/status || fail "holder $pid not running"
"$PAGEIN" evict -q a.bin
J=$(json resident --json a.bin)
[ "$(get "$J" 'd["resident_bytes"]')" = 12000000 ] || { kill "$pid"; fail "locked pages were evicted: $J"; }
kill "$pid"
for i in $(seq 50); do [ -e "$TMP/pid" ] || break; sleep 0.1; done
[ -e "$TMP/pid" ] && fail "pidfile not removed"
# the holder removes its pidfile before it exits and its locks go: wait
# for the process itself (bounded) before evicting
for i in $(seq 100); do running "$pid" || break; sleep 0.1; done
running "$pid" && fail "holder $pid still running 10 s after SIGTERM"
"$PAGEIN" evict -q a.bin
J=$(json resident --json a.bin)
[ "$(get "$J" 'd["resident_bytes"]')" = 0 ] || fail "unlocked pages not evicted: $J"
# lock failure: a non-root holder with a tiny RLIMIT_MEMLOCK gets the how-to-raise message
if command -v setpriv >/dev/null && [ "$(id -u)" = 0 ]; then
  chmod 755 "$TMP"; chmod a+r a.bin   # the holder runs as nobody
  OUT_TXT=$(cd "$TMP" && (ulimit -l 64; setpriv --reuid=65534 --regid=65534 --clear-groups "$PAGEIN" lock a.bin) 2>&1); rc=$?
  [ $rc -eq 1 ] || fail "lock over RLIMIT_MEMLOCK exited $rc: $OUT_TXT"
  expect_contains "RLIMIT_MEMLOCK"
  expect_contains "ulimit -l"
fi

# ---- a model: layers and tensors ----
# A safetensors model with 4 layers of 4 MiB, page-aligned data start.
$PY - <<'EOF'
import json, os, struct
names = ["embed_tokens.weight"] + [f"model.layers.{l}.{p}" for l in range(4) for p in ("a", "b")] + ["lm_head.weight"]
sizes = [1 << 20] + [(2 << 20) + 100, (2 << 20) - 100] * 4 + [1 << 20]
hdr, off = {}, 0
for n, s in zip(names, sizes):
    hdr[n] = {"dtype": "U8", "shape": [s], "data_offsets": [off, off + s]}
    off += s
h = json.dumps(hdr, separators=(",", ":")).encode()
h += b" " * (4088 - len(h))
with open("m.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    f.write(os.urandom(off))
EOF
sync m.safetensors
expect_exit 0 "$PAGEIN" evict m.safetensors
expect_exit 0 "$PAGEIN" warm --layers 1 m.safetensors
expect_contains "warmed 4.00 MiB"
J=$(json resident --json --tensors m.safetensors)
[ "$(get "$J" 'sorted(d.keys())')" = "['bytes', 'files', 'layers', 'pages', 'resident_bytes', 'resident_pages', 'tensors']" ] || fail "schema with --tensors: $J"
[ "$(get "$J" 'sorted(d["layers"][0].keys())')" = "['bytes', 'layer', 'model', 'resident_bytes']" ] || fail "layer schema: $J"
[ "$(get "$J" 'sorted(d["tensors"][0].keys())')" = "['bytes', 'file', 'layer', 'model', 'name', 'resident_bytes']" ] || fail "tensor schema: $J"
[ "$(get "$J" '[l["layer"] for l in d["layers"]]')" = "[-1, 0, 1, 2, 3, 4]" ] || fail "layers: $J"
[ "$(get "$J" '[l["resident_bytes"] == l["bytes"] for l in d["layers"] if l["layer"] == 1]')" = "[True]" ] || fail "layer 1 not resident: $J"
[ "$(get "$J" 'sum(t["resident_bytes"] for t in d["tensors"]) == d["resident_bytes"]')" = True ] || fail "tensor sums: $J"
[ "$(get "$J" 'sum(t["bytes"] for t in d["tensors"])')" = $((18 << 20)) ] || fail "tensor bytes: $J"
expect_exit 0 "$PAGEIN" resident m.safetensors
expect_contains "layer"
expect_contains "embed"
expect_contains "head"
expect_exit 0 "$PAGEIN" resident --tensors='layers\.1\.' m.safetensors
expect_contains "model.layers.1.a"
echo "$OUT_TXT" | grep -q "model.layers.2.a" && fail "--tensors=REGEX did not filter"
expect_exit 0 "$PAGEIN" evict --layers 1 --json m.safetensors
echo "$OUT_TXT" | $PY -c 'import json,sys; d=json.load(sys.stdin); assert d["resident_bytes_after"] == 0, d' || fail "evict --layers: $OUT_TXT"
expect_exit 0 "$PAGEIN" warm --tensors 'lm_head' -o kv m.safetensors
expect_contains "TotalSize=1048576 "
expect_exit 0 "$PAGEIN" evict m.safetensors
J=$(json resident --json m.safetensors)
[ "$(get "$J" 'd["resident_bytes"]')" = 0 ] || fail "model evict: $J"

# ---- a sharded checkpoint (directory with an index): files listed per shard ----
mkdir -p sharded
$PY - <<'EOF2'
import json, os, struct
def write(path, tensors):
    hdr, off = {}, 0
    for n, s in tensors:
        hdr[n] = {"dtype": "U8", "shape": [s], "data_offsets": [off, off + s]}
        off += s
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + os.urandom(off))
s1 = [("model.embed_tokens.weight", 1 << 20), ("model.layers.0.w", 2 << 20)]
s2 = [("model.layers.1.w", 2 << 20), ("lm_head.weight", 1 << 20)]
write("sharded/model-00001-of-00002.safetensors", s1)
write("sharded/model-00002-of-00002.safetensors", s2)
wm = {n: "model-00001-of-00002.safetensors" for n, _ in s1}
wm.update({n: "model-00002-of-00002.safetensors" for n, _ in s2})
json.dump({"metadata": {"total_size": 6 << 20}, "weight_map": wm}, open("sharded/model.safetensors.index.json", "w"))
EOF2
sync sharded/*
expect_exit 0 "$PAGEIN" evict sharded
J=$(json resident --json sharded)
[ "$(get "$J" 'len(d["files"])')" = 2 ] || fail "sharded: two files expected: $J"
[ "$(get "$J" 'd["bytes"]')" = $((6 << 20)) ] || fail "sharded bytes: $J"
expect_exit 0 "$PAGEIN" warm --layers 1 sharded
J=$(json resident --json sharded/model.safetensors.index.json)
[ "$(get "$J" '[l["resident_bytes"] for l in d["layers"] if l["layer"] == 1]')" = "[$((2 << 20))]" ] || fail "sharded layer 1: $J"
expect_exit 0 "$PAGEIN" evict sharded
J=$(json resident --json sharded)
# resident itself reads each file's header; its last page holds the first
# tensor's first bytes (data here starts 8-byte, not page, aligned)
[ "$(get "$J" 'd["resident_bytes"] <= 4096 * len(d["files"])')" = True ] || fail "sharded evict: $J"

# ---- bench share: sharing with a mapping, private copies with read ----
expect_exit 0 "$PAGEIN" bench share m.safetensors --workers 3 --json
echo "$OUT_TXT" | $PY -c '
import json, sys
d = json.load(sys.stdin)
s = {x["strategy"]: x for x in d["strategies"]}
assert len(s["lazy"]["workers"]) == 3 and s["lazy"]["ok"], d
assert s["lazy"]["pss_sum_over_model"] < 1.6, d     # one shared copy (+ per-process overhead)
assert s["read"]["pss_sum_over_model"] > 2.5, d     # three private copies
' || fail "bench share: $OUT_TXT"
rm -f m.safetensors a.bin b.bin
