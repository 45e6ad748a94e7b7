#!/usr/bin/env python3
"""gen.py OUTDIR - writes the hostile training-data files of
tests/cli/hostile_data.test.sh and the fuzz corpora (docs/SAFETY.md,
"Counts and indexes"): tiny files whose counts, sizes or line structure
would cost gigabytes if trusted. Parquet footers are written here with a
Thrift compact writer of a few lines (the format's own encoding; no row
data is needed to claim rows); the Arrow files come from npm apache-arrow
(gen_arrow.mjs) and are committed beside this script.

  pq_rows.parquet       one INT32 column of 1 value, a row group claiming 2^28 rows
  pq_nocols.parquet     no columns, a row group claiming 2^28 rows
  pq_overflow.parquet   no columns, row groups whose rows sum to 2^64 (0)
  lines_bomb.jsonl.zst  about 22 KB of zstd: 2^28 bytes of "a\\n" (128 Mi lines)
  mds_bomb/             an MDS shard whose zstd body holds 1,024 samples of 1 MiB
                        (1 GiB raw, 40 KB compressed) (index.json + shard.00000.mds.zstd)
  lines_64k.jsonl.zst   a valid file of exactly 64 KiB decompressed
  mds_count.mds.zstd    an MDS shard of 2^24 empty samples in a few KB of zstd
  mds_count.seed, mds_small_bomb.seed   fuzz_mds seeds (a first byte 0, then the
                        shard): the former, and 32 samples of 1 MiB in a frame that
                        states its size (fuzz/corpus/mds/hostile-*.seed)

The CLI test and the unit tests read the committed copies:
fuzz/corpus/{parquet_footer,arrow,lines,mds}/hostile-* and tests/data/hostile/mds_bomb/.
"""
import array, json, os, struct, subprocess, sys

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)


class TW:
    """Thrift compact protocol: just what a FileMetaData needs."""

    def __init__(self):
        self.b = bytearray()
        self.last = [0]

    def varint(self, v):
        while v >= 0x80:
            self.b.append((v & 0x7F) | 0x80)
            v >>= 7
        self.b.append(v)

    def field(self, fid, t):
        d = fid - self.last[-1]
        if 0 < d <= 15:
            self.b.append(d << 4 | t)
        else:
            self.b.append(t)
            self.varint((fid << 1) ^ (fid >> 63))
        self.last[-1] = fid

    def i32(self, fid, v):
        self.field(fid, 5)
        self.varint((v << 1) ^ (v >> 63))

    def i64(self, fid, v):
        self.field(fid, 6)
        self.varint(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)

    def string(self, fid, s):
        self.field(fid, 8)
        s = s.encode()
        self.varint(len(s))
        self.b += s

    def begin(self, fid=None):
        if fid is not None:
            self.field(fid, 12)
        self.last.append(0)

    def end(self):
        self.b.append(0)
        self.last.pop()

    def list(self, fid, et, n):
        self.field(fid, 9)
        if n < 15:
            self.b.append(n << 4 | et)
        else:
            self.b.append(0xF0 | et)
            self.varint(n)


def parquet(path, ncols, groups, total):
    """ncols INT32 REQUIRED columns (0 or 1) of one 1-value PLAIN page each;
    groups: the num_rows of each row group; total: FileMetaData.num_rows."""
    body = bytearray(b"PAR1")
    chunks = []
    for _ in groups:
        cc = []
        for _c in range(ncols):
            ph = TW()
            ph.begin()
            ph.i32(1, 0)  # DATA_PAGE
            ph.i32(2, 4)
            ph.i32(3, 4)
            ph.begin(5)  # DataPageHeader
            ph.i32(1, 1)
            ph.i32(2, 0)
            ph.i32(3, 3)
            ph.i32(4, 3)
            ph.end()
            ph.end()
            off = len(body)
            body += ph.b + struct.pack("<i", 7)
            cc.append((off, len(body) - off))
        chunks.append(cc)
    m = TW()
    m.begin()
    m.i32(1, 1)
    m.list(2, 12, 1 + ncols)
    m.begin()
    m.string(4, "schema")
    m.i32(5, ncols)
    m.end()
    for c in range(ncols):
        m.begin()
        m.i32(1, 1)  # INT32
        m.i32(3, 0)  # REQUIRED
        m.string(4, "x")
        m.end()
    m.i64(3, total)
    m.list(4, 12, len(groups))
    for g, rows in enumerate(groups):
        m.begin()
        m.list(1, 12, ncols)
        for off, ln in chunks[g]:
            m.begin()
            m.i64(2, off)
            m.begin(3)  # ColumnMetaData
            m.i32(1, 1)
            m.list(2, 5, 1)
            m.varint(0)
            m.list(3, 8, 1)
            m.varint(1)
            m.b += b"x"
            m.i32(4, 0)
            m.i64(5, 1)
            m.i64(6, ln)
            m.i64(7, ln)
            m.i64(9, off)
            m.end()
            m.end()
        m.i64(2, sum(ln for _, ln in chunks[g]))
        m.i64(3, rows)
        m.end()
    m.end()
    with open(os.path.join(OUT, path), "wb") as f:
        f.write(body + m.b + struct.pack("<I", len(m.b)) + b"PAR1")


parquet("pq_rows.parquet", 1, [1 << 28], 1 << 28)
parquet("pq_nocols.parquet", 0, [1 << 28], 1 << 28)
parquet("pq_overflow.parquet", 0, [(1 << 63) - 1, (1 << 63) - 1, 2], 0)


def zstd_stream(path, chunks, level=19, size=None):
    """zstd of the concatenated chunks (an iterator), written to OUT/path
    (the frame states its content size when size is given)."""
    with open(os.path.join(OUT, path), "wb") as f:
        extra = ["--stream-size=%d" % size] if size else []
        z = subprocess.Popen(["zstd", "-q", "-c", "-%d" % level] + extra, stdin=subprocess.PIPE, stdout=f)
        for c in chunks:
            z.stdin.write(c)
        z.stdin.close()
        if z.wait() != 0:
            sys.exit("zstd failed")


def repeat(piece, total, step=1 << 20):
    block = piece * (step // len(piece))
    for _ in range(total // len(block)):
        yield block


zstd_stream("lines_bomb.jsonl.zst", repeat(b"a\n", 1 << 28))
zstd_stream("lines_64k.jsonl.zst", [(b"x" * 1023 + b"\n") * 64])
# MDS: u32 samples, (samples + 1) u32 offsets from the shard's start, the
# writer's config, then the samples (here 1 MiB each, one fixed-size bytes
# column: zeros, so 1 GiB of raw shard is 40 KB of zstd)
os.makedirs(os.path.join(OUT, "mds_bomb"), exist_ok=True)
n, ssz = 1 << 10, 1 << 20
cfg = json.dumps({"column_encodings": ["bytes"], "column_names": ["x"], "column_sizes": [None]}).encode()
base = 4 + 4 * (n + 1) + len(cfg)


def mds_raw():
    yield struct.pack("<I", n)
    step = 1 << 18
    for a in range(0, n + 1, step):
        yield array.array("I", range(base + ssz * a, base + ssz * min(a + step, n + 1), ssz)).tobytes()
    yield cfg
    for _ in range(n):
        yield struct.pack("<I", ssz - 4) + bytes(ssz - 4)


raw_bytes = base + ssz * n
zstd_stream("mds_bomb/shard.00000.mds.zstd", mds_raw())
zb = os.path.getsize(os.path.join(OUT, "mds_bomb/shard.00000.mds.zstd"))
idx = {"version": 2, "shards": [{"column_encodings": ["bytes"], "column_names": ["x"], "column_sizes": [None],
        "compression": "zstd", "format": "mds", "hashes": [], "raw_data": {"basename": "shard.00000.mds",
        "bytes": raw_bytes, "hashes": {}}, "samples": n, "size_limit": 1 << 31, "version": 2,
        "zip_data": {"basename": "shard.00000.mds.zstd", "bytes": zb, "hashes": {}}}]}
with open(os.path.join(OUT, "mds_bomb", "index.json"), "w") as f:
    json.dump(idx, f)

# an MDS shard of 2^24 empty samples: 64 MiB of header (regular offsets) in
# a few KB of zstd, more samples than its compressed bytes may claim
n = 1 << 24
hl = 4 + 4 * (n + 1)


def mds_count():
    yield struct.pack("<I", n)
    step = 1 << 18
    for a in range(0, n + 1, step):
        yield struct.pack("<I", hl) * (min(a + step, n + 1) - a)


zstd_stream("mds_count.mds.zstd", mds_count(), size=hl)

# fuzz seeds (fuzz_mds reads a shard after a first byte that is even): the
# 2^24-sample shard, and a 32 MiB raw shard (32 samples of 1 MiB, the frame
# stating its size) that the walk reads in groups of the decode budget
def mds_small_bomb(n=32, ssz=1 << 20):
    cfg = json.dumps({"column_encodings": ["bytes"], "column_names": ["x"], "column_sizes": [None]}).encode()
    base = 4 + 4 * (n + 1) + len(cfg)
    yield struct.pack("<I", n) + array.array("I", range(base, base + ssz * (n + 1), ssz)).tobytes() + cfg
    for _ in range(n):
        yield struct.pack("<I", ssz - 4) + bytes(ssz - 4)


small = b"".join(mds_small_bomb())
zstd_stream("mds_small_bomb.mds.zstd", [small], size=len(small))
for name in ("mds_count.mds.zstd", "mds_small_bomb.mds.zstd"):
    with open(os.path.join(OUT, name), "rb") as f:
        body = f.read()
    with open(os.path.join(OUT, name.replace(".mds.zstd", ".seed")), "wb") as f:
        f.write(b"\0" + body)
