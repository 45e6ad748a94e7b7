#!/usr/bin/python3
"""fuzz_seeds.py - writes fuzz/corpus/dcp_model/ (the seeds of
fuzz/fuzz_dcp_model.c) from the torch-written checkpoints here: u32 LE
length + .metadata, then each data file (in the metadata's file order) as
u32 LE length + bytes. Run from the repository root:

    /usr/bin/python3 tests/data/dcp/fuzz_seeds.py
"""
import os
import struct

FX = os.path.join("tests", "data", "dcp")
OUT = os.path.join("fuzz", "corpus", "dcp_model")
FILES = ["__0_0.distcp", "__1_0.distcp", "__2_0.distcp", "__3_0.distcp"]


def seed(name, d, files, meta=None):
    m = open(meta or os.path.join(FX, d, ".metadata"), "rb").read()
    out = struct.pack("<I", len(m)) + m
    for f in files:
        b = open(os.path.join(FX, d, f), "rb").read()
        out += struct.pack("<I", len(b)) + b
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(out)


os.makedirs(OUT, exist_ok=True)
seed("rank4", "rank4", FILES)
seed("v2", "v2", FILES)
seed("rank4_past_end", "rank4", FILES, os.path.join(FX, "bad", "past_end.metadata"))
seed("rank4_short", "rank4", FILES[:1])
seed("expand_big", "expand_big", FILES[:1])
seed("expand_wrap", "expand_wrap", FILES[:1])
seed("rank4_shared_blob", "rank4", FILES, os.path.join(FX, "bad", "shared_blob.metadata"))
