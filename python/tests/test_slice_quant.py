"""get_slice() of a quantized GGUF tensor: its shape, len() and indexing
agree (the uint8 byte layout get_tensor returns), while get_shape(name) and
tensor_info give the element shape."""
import numpy as np
import pytest

import pagein
import ggufref

Q8_0 = 8  # ggml type id: blocks of 32 elements in 34 bytes


@pytest.fixture
def q8(tmp_path, rng):
    raw2 = rng.integers(0, 256, size=4 * 2 * 34, dtype=np.uint8).tobytes()  # [4, 64]
    raw1 = rng.integers(0, 256, size=3 * 34, dtype=np.uint8).tobytes()      # [96]
    p = str(tmp_path / "q.gguf")
    ggufref.write(p, [("general.architecture", "str", "llama")],
                  [("w", Q8_0, [4, 64], raw2), ("v", Q8_0, [96], raw1)])
    return p, raw2, raw1


@pytest.mark.parametrize("fw", ["np", "pt"])
def test_quantized_slice_shape_matches_indexing(q8, fw):
    if fw == "pt":
        pytest.importorskip("torch")
    p, raw2, raw1 = q8
    with pagein.safe_open(p, framework=fw) as f:
        assert f.get_shape("w") == [4, 64] and f.get_dtype("w") == "Q8_0"
        assert f.tensor_info("w")["shape"] == [4, 64]
        s = f.get_slice("w")
        full = np.asarray(f.get_tensor("w"))
        assert s.get_shape() == list(full.shape) == [4, 68]
        assert s.shape == (4, 68) and len(s) == 4 and s.get_dtype() == "Q8_0"
        whole = np.asarray(s[:, :])
        assert list(whole.shape) == s.get_shape()
        assert whole.tobytes() == raw2
        assert np.asarray(s[1:3, 34:]).tobytes() == b"".join(raw2[r * 68 + 34:(r + 1) * 68] for r in (1, 2))
        v = f.get_slice("v")
        assert v.get_shape() == [102] and len(v) == 102 and f.get_shape("v") == [96]
        assert np.asarray(v[-34:]).tobytes() == raw1[-34:]
