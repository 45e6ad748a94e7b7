#!/usr/bin/env python3
"""Fixtures for the dataset-format tests (tests/test_dataformats.c,
tests/cli/dataformats.test.sh, python/tests/test_dataformats.py).

    dataformats_gen.py OUTDIR

Writers nobody here wrote where one exists: Python's tarfile (pax, GNU and
ustar headers) and GNU tar (when installed) for WebDataset shards, gzip and
the zstd command line for compressed text. MDS has no writer on Debian or
npm: its shards are written HERE from MosaicML Streaming's published
layout (streaming/base/format/mds/writer.py and encodings.py), clearly:
u32 sample count, u32 offsets[n+1] (absolute), the config JSON, then the
samples (u32 sizes of the variable columns, then every column's bytes).

Content rules (the tests recompute them):
  wds/shard-SS.tar: 40 samples, key "sSS/KKKKK" (GNU shard: a long
      directory so names need 'L' records), fields txt = b"hello S K",
      cls = str(K % 7), and for even K bin = bytes((S*K + j) % 251 for j < K*13)
  mds/: 2 shards of 30 samples, sample i (global): id int = i,
      text str = "sample %d" % i, tokens ndarray (dynamic) int32 = range(i % 9 + 1),
      vec ndarray:float32:4 = [i, i+.5, -i, 2i], label uint8 = i % 256, raw bytes = b"\\x01" * (i % 5)
      shard 1 is compressed (.mds.zstd) when the zstd command is present
  lines/: a.jsonl (120 lines {"i": i}), b.txt (blank lines skipped),
      c.jsonl.gz and d.jsonl.zst (the same 120 lines as a.jsonl)
"""
import gzip
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile


def wds(out):
    os.makedirs(out, exist_ok=True)
    fmts = [tarfile.PAX_FORMAT, tarfile.GNU_FORMAT, tarfile.USTAR_FORMAT, tarfile.PAX_FORMAT]
    for s, fmt in enumerate(fmts):
        with tarfile.open(os.path.join(out, "shard-%02d.tar" % s), "w", format=fmt) as t:
            for k in range(40):
                base = "s%02d/%05d" % (s, k)
                if s == 1:  # names over 100 bytes: GNU 'L' records
                    base = "long-" + "d" * 120 + "/" + base
                if s == 2:  # ustar: the prefix field carries the directory
                    base = "p" * 90 + "/" + base
                members = [("txt", b"hello %d %d" % (s, k)), ("cls", str(k % 7).encode())]
                if k % 2 == 0:
                    members.append(("bin", bytes((s * k + j) % 251 for j in range(k * 13))))
                for ext, data in members:
                    ti = tarfile.TarInfo(base + "." + ext)
                    ti.size = len(data)
                    ti.mtime = 1700000000
                    t.addfile(ti, io.BytesIO(data))
    # a directory entry and a file without an extension are skipped
    with tarfile.open(os.path.join(out, "shard-03.tar"), "a") as t:
        pass


def gnu_tar(out, src):
    """The same samples as shard-00 written by GNU tar from files on disk."""
    if not shutil.which("tar"):
        return False
    tmp = os.path.join(out, "_gnu")
    os.makedirs(os.path.join(tmp, "s00"), exist_ok=True)
    names = []
    for k in range(40):
        for ext, data in [("txt", b"hello 0 %d" % k), ("cls", str(k % 7).encode())] + \
                ([("bin", bytes((0 * k + j) % 251 for j in range(k * 13)))] if k % 2 == 0 else []):
            n = "s00/%05d.%s" % (k, ext)
            with open(os.path.join(tmp, n), "wb") as fh:
                fh.write(data)
            names.append(n)
    subprocess.check_call(["tar", "--format=gnu", "-cf", os.path.join(out, "gnu.tar"), "-C", tmp] + names)
    shutil.rmtree(tmp)
    return True


def mds_sample(i):
    text = ("sample %d" % i).encode()
    tokens = struct.pack("<%di" % (i % 9 + 1), *range(i % 9 + 1))
    # ndarray, dynamic dtype? no: "ndarray:int32" has a fixed dtype, dynamic shape:
    # [ndim << 2 | shape dtype code (0: uint8)] [shape: ndim x uint8] [values]
    tok = bytes([(1 << 2) | 0, i % 9 + 1]) + tokens
    vec = struct.pack("<4f", i, i + 0.5, -i, 2 * i)
    raw = b"\x01" * (i % 5)
    cols = {"id": struct.pack("<q", i), "label": bytes([i % 256]), "raw": raw, "text": text,
            "tokens": tok, "vec": vec}
    return cols


MDS_COLUMNS = {"id": "int", "label": "uint8", "raw": "bytes", "text": "str", "tokens": "ndarray:int32",
               "vec": "ndarray:float32:4"}
MDS_SIZES = {"id": 8, "label": 1, "raw": None, "text": None, "tokens": None, "vec": 16}


def mds_shard(samples, first):
    names = sorted(MDS_COLUMNS)
    config = {"column_encodings": [MDS_COLUMNS[n] for n in names], "column_names": names,
              "column_sizes": [MDS_SIZES[n] for n in names], "compression": None, "format": "mds",
              "hashes": [], "size_limit": 1 << 26, "version": 2}
    cfg = json.dumps(config, sort_keys=True).encode()
    blobs = []
    for i in range(first, first + samples):
        c = mds_sample(i)
        head = b"".join(struct.pack("<I", len(c[n])) for n in names if MDS_SIZES[n] is None)
        blobs.append(head + b"".join(c[n] for n in names))
    offs = [4 + 4 * (samples + 1) + len(cfg)]
    for b in blobs:
        offs.append(offs[-1] + len(b))
    return struct.pack("<I", samples) + struct.pack("<%dI" % (samples + 1), *offs) + cfg + b"".join(blobs), config


def mds(out):
    os.makedirs(out, exist_ok=True)
    shards = []
    zstd = shutil.which("zstd")
    for s in range(2):
        data, config = mds_shard(30, 30 * s)
        raw = "shard.%05d.mds" % s
        entry = dict(config)
        entry.update({"raw_data": {"basename": raw, "bytes": len(data), "hashes": {}}, "samples": 30,
                      "zip_data": None})
        if s == 1 and zstd:
            with open(os.path.join(out, raw), "wb") as fh:
                fh.write(data)
            subprocess.check_call([zstd, "-q", "-f", "--rm", os.path.join(out, raw), "-o",
                                   os.path.join(out, raw + ".zstd")])
            entry["compression"] = "zstd"
            entry["zip_data"] = {"basename": raw + ".zstd", "bytes": os.path.getsize(os.path.join(out, raw + ".zstd")),
                                 "hashes": {}}
        else:
            with open(os.path.join(out, raw), "wb") as fh:
                fh.write(data)
        shards.append(entry)
    with open(os.path.join(out, "index.json"), "w") as fh:
        json.dump({"shards": shards, "version": 2}, fh, sort_keys=True)


def lines(out):
    os.makedirs(out, exist_ok=True)
    text = "".join(json.dumps({"i": i}) + "\n" for i in range(120)).encode()
    with open(os.path.join(out, "a.jsonl"), "wb") as fh:
        fh.write(text)
    with open(os.path.join(out, "b.txt"), "wb") as fh:
        fh.write(b"one\n\ntwo\r\n\n\nthree")
    with gzip.open(os.path.join(out, "c.jsonl.gz"), "wb") as fh:
        fh.write(text)
    if shutil.which("zstd"):
        with open(os.path.join(out, "d.jsonl"), "wb") as fh:
            fh.write(text)
        subprocess.check_call(["zstd", "-q", "-f", "--rm", os.path.join(out, "d.jsonl"), "-o",
                               os.path.join(out, "d.jsonl.zst")])


def main():
    out = sys.argv[1]
    wds(os.path.join(out, "wds"))
    gnu_tar(os.path.join(out, "wds"), None)
    with open(os.path.join(out, "wds", "shard-00.tar"), "rb") as fh, \
            gzip.open(os.path.join(out, "wds-gz.tar.gz"), "wb") as gz:
        gz.write(fh.read())
    mds(os.path.join(out, "mds"))
    lines(os.path.join(out, "lines"))


if __name__ == "__main__":
    main()
