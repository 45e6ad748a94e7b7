"""get_tensor(name, dtype="float32"|"float16"|"bfloat16") (the Python
side): float tensors converted exactly (round to nearest even),
GGUF block types dequantized by the library's pagein_tensor_dequantize and
checked against an independent implementation of ggml's Q8_0/Q4_0 blocks
written here from the published block layouts."""
import os

import numpy as np
import pytest

import ggufref
import pagein
import stref
from conftest import real_files



def bf16_bits(f32):
    """Independent float32 -> bfloat16 rounding (nearest even, NaN kept quiet)."""
    out = []
    for u in np.asarray(f32, np.float32).reshape(-1).view(np.uint32).tolist():
        if (u & 0x7FFFFFFF) > 0x7F800000:
            out.append((u >> 16) | 64)
        else:
            lsb = (u >> 16) & 1
            out.append(((u + 0x7FFF + lsb) >> 16) & 0xFFFF)
    return np.array(out, np.uint16).reshape(np.shape(f32))


def test_float_tensors_convert(tmp_path, rng):
    f32 = (rng.standard_normal(64) * 100).astype("<f4")
    f32[:6] = [np.inf, -np.inf, np.nan, 0.0, -0.0, 65519.0]
    f32[6:8] = np.frombuffer(np.array([0x3F808000, 0x3F818000], "<u4").tobytes(), "<f4")  # exact ties
    bf = bf16_bits(f32)
    p = str(tmp_path / "f.safetensors")
    stref.write(p, {"f32": ("F32", [8, 8], f32.tobytes()), "f16": ("F16", [64], f32.astype("<f2").tobytes()),
                    "bf16": ("BF16", [64], bf.astype("<u2").tobytes()),
                    "f64": ("F64", [64], f32.astype("<f8").tobytes())})
    with pagein.safe_open(p, "np") as f:
        a = f.get_tensor("f32", dtype="float32")
        assert a.shape == (8, 8) and a.dtype == np.float32
        np.testing.assert_array_equal(a.reshape(-1), f32)
        np.testing.assert_array_equal(f.get_tensor("f32", dtype="float16"), f32.astype(np.float16).reshape(8, 8))
        b = f.get_tensor("f32", dtype="bfloat16")
        assert b.dtype == np.uint16 and b.shape == (8, 8)
        np.testing.assert_array_equal(b.reshape(-1), bf)
        np.testing.assert_array_equal(f.get_tensor("bf16", dtype="float32"),
                                      (bf.astype(np.uint32) << 16).view(np.float32))
        np.testing.assert_array_equal(f.get_tensor("f16", dtype="float32"), f32.astype(np.float16).astype(np.float32))
        np.testing.assert_array_equal(f.get_tensor("f64", dtype=np.float32), f32)
        with pytest.raises(ValueError):
            f.get_tensor("f32", dtype="int8")
    torch = pytest.importorskip("torch")
    with pagein.safe_open(p, "pt") as f:
        t = f.get_tensor("f32", dtype=torch.bfloat16)
        assert t.dtype == torch.bfloat16 and t.shape == (8, 8)
        ref = torch.from_numpy(f32.copy()).to(torch.bfloat16).reshape(8, 8)
        assert torch.equal(t.view(torch.int16)[~torch.isnan(ref)], ref.view(torch.int16)[~torch.isnan(ref)])
        assert f.get_tensor("f16", dtype="float16").dtype == torch.float16


def q8_0_ref(raw, n):
    b = np.frombuffer(raw, np.uint8).reshape(-1, 34)
    d = b[:, :2].copy().view("<f2").astype(np.float32)
    q = b[:, 2:].copy().view(np.int8).astype(np.float32)
    return (q * d).reshape(-1)[:n].astype(np.float32)


def q4_0_ref(raw, n):
    b = np.frombuffer(raw, np.uint8).reshape(-1, 18)
    d = b[:, :2].copy().view("<f2").astype(np.float32)
    qs = b[:, 2:]
    q = np.concatenate([(qs & 0xF).astype(np.int32) - 8, (qs >> 4).astype(np.int32) - 8], axis=1)
    return (q.astype(np.float32) * d).reshape(-1)[:n].astype(np.float32)


def _blocks(rng, nblocks, bsize):
    raw = rng.integers(0, 256, (nblocks, bsize), dtype=np.uint8)
    scales = np.array([1.0, -1.0, 65504.0, -65504.0, 6e-8, 0.0, 0.5, 1e-3], "<f2")
    raw[:, :2] = np.resize(scales, nblocks).view(np.uint8).reshape(nblocks, 2)
    return raw.tobytes()


def test_quantized_blocks_match_reference(tmp_path, rng):
    p = str(tmp_path / "q.gguf")
    q8, q4 = _blocks(rng, 16, 34), _blocks(rng, 16, 18)
    ggufref.write(p, [("general.architecture", "str", "llama")],
                  [("q8", 8, [4, 128], q8), ("q4", 2, [4, 128], q4)])
    with pagein.safe_open(p, "np") as f:
        for name, ref in (("q8", q8_0_ref(q8, 512)), ("q4", q4_0_ref(q4, 512))):
            a = f.get_tensor(name, dtype="float32")
            assert a.shape == (4, 128) and a.dtype == np.float32
            np.testing.assert_array_equal(a.reshape(-1), ref)
            with np.errstate(over="ignore"):  # scales of 65504 overflow F16: inf, as ggml gives
                ref16 = ref.astype(np.float16)
            np.testing.assert_array_equal(f.get_tensor(name, dtype="float16").reshape(-1), ref16)
            np.testing.assert_array_equal(f.get_tensor(name, dtype="bfloat16").reshape(-1), bf16_bits(ref))


def test_strided_torch_tensor_converts(tmp_path):
    torch = pytest.importorskip("torch")
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    p = str(tmp_path / "s.pt")
    torch.save({"t": base.t(), "h": base.half()}, p)
    with pagein.safe_open(p, "pt") as f:
        assert torch.equal(f.get_tensor("t", dtype="float32"), base.t())
        assert torch.equal(f.get_tensor("h", dtype="bfloat16"), base.to(torch.bfloat16))


def test_real_q8_0_file():
    path = [p for p in real_files("gguf", ".gguf") if "q8_0" in p][0]
    _, _, tensors = ggufref.read(path)
    checked = 0
    with pagein.open_model(path) as m:
        for name, dtype, shape, raw in tensors:
            if dtype != "Q8_0":
                continue
            n = int(np.prod(shape))
            np.testing.assert_array_equal(m.get_tensor(name, dtype="float32").reshape(-1), q8_0_ref(raw, n))
            checked += 1
    assert checked > 0
