"""GGUF through safe_open and open_model: tensors and typed metadata equal
an independent reader's (tests/ggufref.py) for every real GGUF file."""
import json
import os

import numpy as np
import pytest

import ggufref
import pagein
from conftest import malformed_files, real_files

GGUF = real_files("gguf", ".gguf")


def same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return a == b or (a != a and b != b)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b and type(a) is type(b)


@pytest.mark.parametrize("path", GGUF, ids=os.path.basename)
def test_gguf_equals_reference(path):
    version, meta, tensors = ggufref.read(path)
    with pagein.safe_open(path, framework="np") as f:
        assert f.info()["format"] == "gguf"
        got_meta = f.metadata_typed()
        assert list(got_meta) == list(meta)
        for k, v in meta.items():
            assert same(got_meta[k], v), k
        # metadata(): dict[str, str] as safetensors gives, non-strings as JSON
        strs = f.metadata()
        assert list(strs) == list(meta)
        for k, v in meta.items():
            assert isinstance(strs[k], str), k
            assert strs[k] == v if isinstance(v, str) else same(json.loads(strs[k]), v), k
        assert f.offset_keys() == [t[0] for t in tensors]
        for name, dtype, shape, raw in tensors:
            assert f.get_dtype(name) == dtype
            assert f.get_shape(name) == shape
            a = f.get_tensor(name)
            assert a.tobytes() == raw, name
            if dtype.startswith("Q"):
                assert a.dtype == np.uint8  # block bytes, type name via get_dtype


def test_gguf_quantized_rows(tmp_path):
    path = [p for p in GGUF if "q8_0" in p][0]
    with pagein.safe_open(path, "np") as f:
        shape = f.get_shape("blk.0.attn_q.weight")
        a = f.get_tensor("blk.0.attn_q.weight")
        assert a.shape == (shape[0], shape[1] // 32 * 34)  # Q8_0: 32 values in 34 bytes
        np.testing.assert_array_equal(f.get_slice("blk.0.attn_q.weight")[3:5], a[3:5])


def test_gguf_torch(tmp_path):
    torch = pytest.importorskip("torch")
    path = [p for p in GGUF if "llama-2-tiny" in p][0]
    _, _, tensors = ggufref.read(path)
    with pagein.safe_open(path, "pt") as f:
        for name, dtype, shape, raw in tensors:
            t = f.get_tensor(name)
            assert list(t.shape) == shape
            assert t.dtype == {"F16": torch.float16, "F32": torch.float32}[dtype]
            assert t.numpy().tobytes() == raw


@pytest.mark.parametrize("path", malformed_files("gguf"), ids=os.path.basename)
def test_gguf_malformed(path):
    with pytest.raises(pagein.FormatError) as ei:
        pagein.safe_open(path, "np")
    assert os.path.basename(path) in str(ei.value)
