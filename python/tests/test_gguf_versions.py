"""GGUF metadata of every version through Python: the
extension reads values through the library's accessors, so v1 files
(32-bit lengths and counts, as llama2.c's converter wrote them) give the
same values as v2 and v3. Files come from the tests' independent writer
(ggufref.write); values are checked against its independent reader."""
import json
import math

import numpy as np
import pytest

import ggufref
import pagein

META = [
    ("general.architecture", "str", "llama"),
    ("general.name", "str", "caf\u00e9 \u2603 tokens"),
    ("llama.block_count", "u32", 2),
    ("u8", "u8", 255), ("i8", "i8", -128), ("u16", "u16", 65535), ("i16", "i16", -32768),
    ("i32", "i32", -(1 << 31)), ("u64", "u64", (1 << 64) - 1), ("i64", "i64", -(1 << 63)),
    ("f32", "f32", 0.5), ("f64", "f64", -1e300), ("nan", "f32", float("nan")), ("yes", "bool", True),
    ("no", "bool", False),
    ("tokenizer.ggml.tokens", "arr", ("str", ["<unk>", "<s>", "\n", "\t", "", "\u2581the"])),
    ("tokenizer.ggml.scores", "arr", ("f32", [0.0, -1.5, 2.25, -1000.0, 0.0, 1.0])),
    ("tokenizer.ggml.token_type", "arr", ("i32", [2, 3, 6, 6, 1, -1])),
    ("u8s", "arr", ("u8", [0, 1, 255])), ("bools", "arr", ("bool", [True, False, True])),
    ("u64s", "arr", ("u64", [0, (1 << 64) - 1])), ("i64s", "arr", ("i64", [-(1 << 63), 7])),
    ("f64s", "arr", ("f64", [math.pi, -0.0])), ("empty", "arr", ("str", [])),
    ("nested", "arr", ("arr", [("i16", [1, -2]), ("str", ["a", "bc"]), ("arr", [("u8", [9])])])),
]


def same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return type(a) is type(b) and (a == b or (a != a and b != b))
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b and type(a) is type(b)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_gguf_metadata_every_version(tmp_path, version):
    p = str(tmp_path / ("v%d.gguf" % version))
    w = np.arange(64, dtype="<f4")
    ggufref.write(p, META, [("blk.0.w", 0, [2, 32], w.tobytes()), ("blk.1.w", 0, [32], w[:32].tobytes())],
                  version=version)
    v, ref, tensors = ggufref.read(p)
    assert v == version and len(ref) == len(META)
    with pagein.safe_open(p, "np") as f:
        assert f.info()["version"] == version
        typed = f.metadata_typed()
        assert list(typed) == list(ref)
        for k, val in ref.items():
            assert same(typed[k], val), (k, typed[k], val)
        strs = f.metadata()
        for k, val in ref.items():
            assert isinstance(strs[k], str)
            if not isinstance(val, str):
                assert same(json.loads(strs[k]), val), k
        np.testing.assert_array_equal(f.get_tensor("blk.0.w"), w.reshape(2, 32))
    with pagein.open_model(p) as m:
        for k, val in ref.items():
            assert same(m.metadata[k], val), k
        assert same(m.metadata_typed()["nested"], ref["nested"])
