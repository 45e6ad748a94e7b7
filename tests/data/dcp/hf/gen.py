#!/usr/bin/python3
"""gen.py [OUTDIR] - torch's safetensors flavour of a Distributed Checkpoint
(torch 2.7 and later, HuggingFaceStorageWriter / FileSystemWriter with
serialization_format=SAFETENSORS), for pagein's tests. Regenerate with

    /usr/bin/python3 tests/data/dcp/hf/gen.py tests/data/dcp/hf

No torch 2.7 on Debian (its python3-torch is 1.13, without this writer), and
no numpy: this script writes the files with plain Python, following the
layout of torch's own writer exactly, as read in the pytorch repository:

  torch/distributed/checkpoint/_hf_utils.py (commit 59b623e6a29782e2e5127e43093249f6854e5a0d):
    CUSTOM_METADATA_KEY = DCP_SHARDING_INFO_KEY = "DCP_SHARDING_INFO",
    SAVED_OFFSETS_KEY = "saved_offsets", DCP_VERSION_KEY = "DCP_VERSION"
    (HF_DCP_VERSION 1.0), FORMAT_KEY "format" = "pt", SHARDED_FILE_NAME
    "shard-{shard_idx}-model-{cpt_idx}-of-{num_files}" + ".safetensors"
    (indexes zero-filled to 5 digits), _get_dcp_custom_metadata (the
    sharding info is a JSON string inside the safetensors "__metadata__").
  torch/distributed/checkpoint/filesystem.py, _write_files_from_queue: each
    rank's file is safetensors.torch.save(tensor_dict, metadata={
    "DCP_SHARDING_INFO": json.dumps({fqn: {"saved_offsets": chunk.offsets}}),
    "DCP_VERSION": "1.0", "format": "pt"}), tensor_dict holding each saved
    chunk under its fqn (so one chunk per fqn per file).
  torch/distributed/checkpoint/_consolidate_hf_safetensors.py (commit
    06cdb9ced207f023de28a2360ef84d562cb25203): the full shape of an fqn is
    max(offset + size) over its chunks in every dimension, its dtype the
    chunks' safetensors dtype; each chunk is copied to its offsets.

The safetensors files themselves are written as the safetensors library
writes them: an 8-byte little-endian header length, compact JSON with
"__metadata__" first and the tensors ordered by dtype (descending, the Rust
enum order: F32 before BF16) then name, data offsets relative to the data
section, the header padded with spaces to a multiple of 8.

Checkpoint (OUTDIR/ckpt/, 4 ranks, one file per rank):
  rows.weight f32  [8, 6]  row-sharded: rank r holds rows [2r, 2r+2)
  cols.weight bf16 [4, 8]  column-sharded: rank r holds columns [2r, 2r+2)
  emb.weight  bf16 [5, 3]  uneven rows: rank 0 [0, 3), rank 2 [3, 5)
  norm.weight f32  [6]     replicated: written once, by rank 0 (DCP dedups)
Element k (row-major, in the whole tensor) of every tensor is
(k % 251) - 17.5 + k / 64 converted to the dtype (bf16: f32 bits truncated).
OUTDIR/expected.safetensors holds the full tensors, reconstructed here in
plain Python from the same values (not from the shards).

OUTDIR/fqn/: the same tensors in Hugging Face transformers' chunk layout
(its DCP storage writer that keeps several chunks of a parameter in one
file, metadata "transformers_dcp_chunk_version": "1"): two files, each
holding two ranks' chunks under the keys chunk_0, chunk_1, ..., their
DCP_SHARDING_INFO entries naming the tensor ("fqn") and its whole shape
("shape") beside "saved_offsets"; it consolidates to expected.safetensors.

Malformed variants, each a copy of ckpt/ with one file changed
(OUTDIR/bad_*/): overlap (two chunks share rows), gap (a rank's chunk
missing: rows 4-5 uncovered), dtype (one chunk of cols.weight in F32),
ndim (saved_offsets with 1 dimension for a 2-d chunk), missing (an fqn
without sharding info), extra (sharding info for a tensor the file lacks),
json (the sharding info not JSON), huge (an offset near 2^64).
"""
import json
import os
import shutil
import struct
import sys

# Rust safetensors Dtype enum order (the writer sorts descending)
DTYPE_RANK = {"BOOL": 0, "U8": 4, "I8": 5, "I16": 9, "U16": 10, "F16": 11, "BF16": 12,
              "I32": 13, "U32": 14, "F32": 15, "F64": 16, "I64": 17, "U64": 18}


def value(k):
    return (k % 251) - 17.5 + k / 64.0


def enc(dtype, vals):
    f32 = struct.pack("<%df" % len(vals), *vals)
    if dtype == "F32":
        return f32
    assert dtype == "BF16"
    return b"".join(f32[i + 2:i + 4] for i in range(0, len(f32), 4))


def full_values(shape):
    n = 1
    for s in shape:
        n *= s
    return [value(k) for k in range(n)]


def box(shape, off, size):
    """Row-major element indexes of the box [off, off + size) of shape."""
    idx = [0]
    stride = 1
    strides = []
    for s in reversed(shape):
        strides.append(stride)
        stride *= s
    strides.reverse()
    for d in range(len(shape)):
        idx = [i + (off[d] + j) * strides[d] for i in idx for j in range(size[d])]
    return idx


def st_bytes(tensors, metadata):
    """tensors: {name: (dtype, shape, bytes)} -> the safetensors file."""
    order = sorted(tensors, key=lambda n: (-DTYPE_RANK[tensors[n][0]], n))
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    data = b""
    for n in order:
        dt, shape, b = tensors[n]
        header[n] = {"dtype": dt, "shape": list(shape), "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


TENSORS = {  # name: (dtype, full shape, [(rank, offsets, sizes)])
    "rows.weight": ("F32", [8, 6], [(r, [2 * r, 0], [2, 6]) for r in range(4)]),
    "cols.weight": ("BF16", [4, 8], [(r, [0, 2 * r], [4, 2]) for r in range(4)]),
    "emb.weight": ("BF16", [5, 3], [(0, [0, 0], [3, 3]), (2, [3, 0], [2, 3])]),
    "norm.weight": ("F32", [6], [(0, [0], [6])]),
}


def shard_name(rank):
    # SHARDED_FILE_NAME with shard_idx = rank + 1, one logical file (1 of 1)
    return "shard-%05d-model-%05d-of-%05d.safetensors" % (rank + 1, 1, 1)


def rank_files():
    """{file name: (tensors, sharding info)} as each rank writes them."""
    out = {}
    for r in range(4):
        tensors, info = {}, {}
        for name, (dt, shape, chunks) in TENSORS.items():
            vals = full_values(shape)
            for (rk, off, size) in chunks:
                if rk != r:
                    continue
                tensors[name] = (dt, size, enc(dt, [vals[i] for i in box(shape, off, size)]))
                info[name] = {"saved_offsets": off}
        out[shard_name(r)] = (tensors, info)
    return out


def fqn_files():
    """Two files in transformers' chunk layout: ranks 0-1 and 2-3 each."""
    out = {}
    for f in range(2):
        tensors, info, k = {}, {}, 0
        for name, (dt, shape, chunks) in TENSORS.items():
            vals = full_values(shape)
            for (rk, off, size) in chunks:
                if rk // 2 != f:
                    continue
                key = "chunk_%d" % k
                k += 1
                tensors[key] = (dt, size, enc(dt, [vals[i] for i in box(shape, off, size)]))
                info[key] = {"fqn": name, "shape": shape, "saved_offsets": off}
        m = {"format": "pt", "transformers_dcp_chunk_version": "1", "DCP_SHARDING_INFO": json.dumps(info)}
        out[shard_name(f)] = (tensors, m)
    return out


def meta(info):
    return {"DCP_SHARDING_INFO": json.dumps(info), "DCP_VERSION": "1.0", "format": "pt"}


def write_dir(d, files):
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    for fn, (tensors, m) in files.items():
        with open(os.path.join(d, fn), "wb") as f:
            f.write(st_bytes(tensors, m))


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    files = rank_files()
    good = {fn: (t, meta(i)) for fn, (t, i) in files.items()}
    write_dir(os.path.join(outdir, "ckpt"), good)
    full = {n: (dt, shape, enc(dt, full_values(shape))) for n, (dt, shape, _) in TENSORS.items()}
    with open(os.path.join(outdir, "expected.safetensors"), "wb") as f:
        f.write(st_bytes(full, {"format": "pt"}))

    write_dir(os.path.join(outdir, "fqn"), fqn_files())

    r0, r1, r2 = shard_name(0), shard_name(1), shard_name(2)

    def variant(tag, fn, change):
        v = {k: (dict(t), json.loads(json.dumps(i))) for k, (t, i) in files.items()}
        change(v[fn][0], v[fn][1])
        m = {k: (t, meta(i)) for k, (t, i) in v.items()}
        write_dir(os.path.join(outdir, "bad_" + tag), m)

    variant("overlap", r1, lambda t, i: i["rows.weight"].update(saved_offsets=[1, 0]))
    variant("gap", r2, lambda t, i: (t.pop("rows.weight"), i.pop("rows.weight")))
    variant("dtype", r1, lambda t, i: t.update({"cols.weight": ("F32", [4, 2], b"\0" * 32)}))
    variant("ndim", r1, lambda t, i: i["rows.weight"].update(saved_offsets=[2]))
    variant("missing", r1, lambda t, i: i.pop("cols.weight"))
    variant("extra", r1, lambda t, i: i.update({"ghost": {"saved_offsets": [0]}}))
    variant("huge", r1, lambda t, i: i["rows.weight"].update(saved_offsets=[18446744073709551615, 0]))
    v = {k: (t, meta(i)) for k, (t, i) in files.items()}
    v[r1][1]["DCP_SHARDING_INFO"] = "{not json"
    write_dir(os.path.join(outdir, "bad_json"), v)


if __name__ == "__main__":
    main()
