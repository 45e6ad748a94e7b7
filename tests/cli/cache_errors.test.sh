# resident / warm / evict / lock: honest exit codes. A model that fails to
# open is an error (never "a plain file"); selections that match nothing and
# flags that do not apply are refused; FIFOs fail at once; the pidfile never
# follows a symlink. Every command runs under `timeout`: a regression fails
# instead of hanging.
. "$REPO/tests/cli/lib.sh"
T="timeout 20"

"$PAGEIN" make-sample m.safetensors --layers 8 --hidden 64 --vocab 128 -q || fail "make-sample"
printf 'hello, plain text\n' > text.txt

# ---- selections that match nothing ----
expect_exit 1 $T "$PAGEIN" warm --layers 99 m.safetensors
expect_contains "layers 99 matched nothing"
expect_contains "8 layers (0-7)"
echo "$OUT_TXT" | grep -q "warmed" && fail "warm --layers 99 reported work: $OUT_TXT"
expect_exit 1 $T "$PAGEIN" warm --tensors nomatch m.safetensors
expect_contains "'nomatch' matched no tensor"
expect_exit 1 $T "$PAGEIN" evict --layers 2,50-60 m.safetensors
expect_contains "50-60 matched nothing"
expect_exit 1 $T "$PAGEIN" resident --layers 3 --tensors=nomatch m.safetensors
expect_contains "of the selected layers"
expect_exit 0 $T "$PAGEIN" warm --layers 7,head --tensors 'mlp|lm_head' m.safetensors
# flags that do not apply: exit 2
expect_exit 2 $T "$PAGEIN" evict --layers 0 text.txt
expect_contains "not one"
expect_exit 2 $T "$PAGEIN" warm --tensors x text.txt
expect_exit 2 $T "$PAGEIN" resident --tensors text.txt
expect_exit 2 $T "$PAGEIN" warm --layers 0 -p 0-10 m.safetensors
expect_exit 2 $T "$PAGEIN" evict --threads 2 text.txt
expect_exit 2 $T "$PAGEIN" resident --chunk 1M text.txt
# a plain file without a model selection still works as one
expect_exit 0 $T "$PAGEIN" warm text.txt
expect_exit 0 $T "$PAGEIN" evict text.txt
# so does a zip that is not a torch checkpoint, and a directory without models
$PY -c 'import zipfile; zipfile.ZipFile("d.zip", "w").writestr("a.txt", "hello " * 100)'
expect_exit 0 $T "$PAGEIN" warm d.zip
mkdir -p docs && cp text.txt d.zip docs/
expect_exit 0 $T "$PAGEIN" warm docs

# ---- a model that fails to open is an error ----
mkdir -p sh
"$PAGEIN" convert m.safetensors sh/model.safetensors --max-shard-size 100K -q || fail "convert to shards"
n=$(ls sh/*.safetensors | wc -l)
[ "$n" -ge 8 ] || fail "expected at least 8 shards (more than ulimit -n 8 leaves), got $n"
expect_exit 0 $T "$PAGEIN" warm sh/model.safetensors.index.json
cp -r sh broken
rm broken/model-00002-of-*.safetensors
for cmd in warm evict resident; do
  expect_exit 1 $T "$PAGEIN" $cmd broken/model.safetensors.index.json
  expect_contains "broken/model.safetensors.index.json"
  echo "$OUT_TXT" | grep -q "^warmed\|^evicted\|^total" && fail "$cmd reported work on a broken model: $OUT_TXT"
  expect_exit 1 $T "$PAGEIN" $cmd broken
done
J=$($T "$PAGEIN" warm --json broken/model.safetensors.index.json 2>/dev/null); rc=$?
[ $rc -eq 1 ] || fail "warm --json on a broken model exited $rc"
expect_exit 1 $T "$PAGEIN" lock -d -w broken/model.safetensors.index.json
expect_exit 1 $T "$PAGEIN" lock -d -w broken
expect_exit 1 $T "$PAGEIN" lock -d broken/model.safetensors.index.json
echo "$OUT_TXT" | grep -q "holder pid" && fail "lock -d started a holder for a broken model: $OUT_TXT"
# EMFILE: too few descriptors for the shards is an error too
OUT_TXT=$(ulimit -n 8; $T "$PAGEIN" warm sh/model.safetensors.index.json 2>&1); rc=$?
[ $rc -ne 0 ] || fail "warm with ulimit -n 8 exited 0: $OUT_TXT"
echo "$OUT_TXT" | grep -q "^warmed" && fail "warm with ulimit -n 8 reported work: $OUT_TXT"
# a truncated model with --layers: an error, not the whole file
head -c 300000 m.safetensors > trunc.safetensors
for cmd in warm evict; do
  expect_exit 1 $T "$PAGEIN" $cmd --layers 0 trunc.safetensors
  expect_contains "trunc.safetensors"
  expect_exit 1 $T "$PAGEIN" $cmd trunc.safetensors
done
# lock on a truncated file: says so
expect_exit 1 $T "$PAGEIN" lock -d -w trunc.safetensors
expect_contains "trunc"
echo "$OUT_TXT" | grep -qi "memlock" && fail "lock on a truncated file blamed RLIMIT_MEMLOCK: $OUT_TXT"

# ---- FIFOs, sockets, devices: refused at once ----
mkfifo fifo
for cmd in resident warm evict lock; do
  expect_exit 1 $T "$PAGEIN" $cmd fifo
  expect_contains "FIFO"
done
expect_exit 1 $T "$PAGEIN" resident /dev/null
expect_contains "character device"
# a FIFO inside a directory that is walked is skipped, not opened
mkdir -p plain && cp text.txt plain/ && mkfifo plain/pipe
expect_exit 0 $T "$PAGEIN" warm plain

# ---- lock --pidfile never follows a symlink ----
echo "precious" > victim.txt
ln -s victim.txt evil.pid
expect_exit 2 $T "$PAGEIN" lock -d -w -P evil.pid text.txt
expect_contains "symbolic link"
[ "$(cat victim.txt)" = "precious" ] || fail "the pidfile symlink's target was overwritten"
# dangling symlink: nothing is created at its target
ln -s created-by-pagein.txt dangling.pid
expect_exit 2 $T "$PAGEIN" lock -d -w -P dangling.pid text.txt
[ -e created-by-pagein.txt ] && fail "a file was created through a dangling pidfile symlink"
# hard link to another file: refused too
ln victim.txt hard.pid
expect_exit 2 $T "$PAGEIN" lock -d -w -P hard.pid text.txt
[ "$(cat victim.txt)" = "precious" ] || fail "a hard-linked pidfile's other name was overwritten"
# a fresh pidfile, and a stale one, work; the holder removes it when it ends
for pf in fresh.pid stale.pid; do
  [ $pf = stale.pid ] && echo 12345 > stale.pid
  OUT_TXT=$($T "$PAGEIN" lock -d -w -P $pf text.txt 2>&1); rc=$?
  if [ $rc -ne 0 ] && echo "$OUT_TXT" | grep -qi "memlock"; then
    skip_part "working pidfile: lock refused by RLIMIT_MEMLOCK"; break
  fi
  [ $rc -eq 0 ] || fail "lock -P $pf exited $rc: $OUT_TXT"
  pid=$(cat $pf)
  [ "$pid" != 12345 ] && running "$pid" || fail "$pf does not name the holder"
  kill -TERM "$pid"
  for i in $(seq 50); do running "$pid" || break; sleep 0.1; done
  running "$pid" && { kill -KILL "$pid"; fail "holder did not end"; }
  [ -e $pf ] && fail "$pf left behind"
done

# ---- errors say the path and errno once ----
expect_exit 1 $T "$PAGEIN" warm missing.safetensors
[ "$(echo "$OUT_TXT" | grep -o "missing.safetensors" | wc -l)" = 1 ] || fail "path repeated: $OUT_TXT"
[ "$(echo "$OUT_TXT" | grep -o "No such file" | wc -l)" = 1 ] || fail "errno repeated: $OUT_TXT"
exit 0
