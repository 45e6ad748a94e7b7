"""get_slice follows numpy's basic indexing for every basic index:
a property test against numpy on random shapes and random indexes
(ints, negative ints, slices with any step, Ellipsis, None), the cases the
issue names, and a clear TypeError for everything else."""
import os
import random

import numpy as np
import pytest

import pagein
import stref

DTYPES = ["F32", "I16", "U8", "F64"]


def _seed():
    seed = int(os.environ.get("PAGEIN_SEED") or random.SystemRandom().randrange(1 << 31))
    print("test_slice_basic seed: PAGEIN_SEED=%d" % seed)
    return seed


def _rand_shape(r):
    return [r.randrange(0, 6) for _ in range(r.randrange(0, 5))]


def _rand_index(r, shape):
    """A random basic index for shape; sometimes out of range (IndexError)."""
    items = []
    k = r.randrange(0, len(shape) + 1)
    for d in range(k):
        n = shape[d]
        kind = r.random()
        if kind < 0.4 and n > 0:
            items.append(r.randrange(-n, n))
        elif kind < 0.45:
            items.append(r.choice([n, -n - 1, n + 2]))  # out of range
        else:
            def bound():
                return None if r.random() < 0.3 else r.randrange(-n - 3, n + 4)
            step = r.choice([None, 1, 2, 3, -1, -2, -3])
            items.append(slice(bound(), bound(), step))
    if r.random() < 0.3:
        items.insert(r.randrange(0, len(items) + 1), Ellipsis)
    if r.random() < 0.15:
        items.insert(r.randrange(0, len(items) + 1), None)
    if r.random() < 0.1:
        items = [np.int64(i) if isinstance(i, int) else i for i in items]
    if len(items) == 1 and r.random() < 0.5:
        return items[0]
    return tuple(items)


def _bounds_refused(idx, shape):
    """True when idx has an explicit bound outside its dimension, which
    get_slice refuses (pagein.SliceError, as safetensors) where numpy clips
    slices: a slice start outside [-n, n] ([-n, n-1] with a negative step)
    or a stop outside [-n, n]. Integers out of range raise in numpy too."""
    items = idx if isinstance(idx, tuple) else (idx,)
    used = sum(1 for it in items if it is not None and it is not Ellipsis)
    axis = 0
    for it in items:
        if it is None:
            continue
        if it is Ellipsis:
            axis += len(shape) - used
            continue
        if axis >= len(shape):
            return False  # too many indexes: numpy's IndexError
        n = shape[axis]
        if isinstance(it, slice):
            neg = it.step is not None and it.step < 0
            if it.start is not None and not -n <= it.start <= (n - 1 if neg else n):
                return True
            if it.stop is not None and not -n <= it.stop <= n:
                return True
        axis += 1
    return False


def _same(got, want):
    if isinstance(want, np.generic):
        assert isinstance(got, np.generic), (type(got), want)
        assert got.dtype == want.dtype
        assert got == want or (got != got and want != want)
    else:
        assert isinstance(got, np.ndarray), type(got)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_slice_property_against_numpy(tmp_path):
    seed = _seed()
    r = random.Random(seed)
    rng = np.random.default_rng(seed)
    tensors, refs = {}, {}
    for i in range(40):
        shape, dt = _rand_shape(r), r.choice(DTYPES)
        raw = stref.random_tensor(rng, dt, shape)
        tensors["t%d" % i] = (dt, shape, raw)
        refs["t%d" % i] = np.frombuffer(raw, np.dtype(stref.DTYPES[dt][1]).newbyteorder("<")).reshape(shape)
    p = str(tmp_path / "p.safetensors")
    stref.write(p, tensors)
    torch = None
    try:
        import torch
    except ImportError:
        print("torch not importable: framework 'pt' part skipped")
    checked = 0
    with pagein.safe_open(p, "np") as f, pagein.safe_open(p, "pt" if torch else "np") as ft:
        for name, ref in refs.items():
            s, st = f.get_slice(name), ft.get_slice(name)
            for _ in range(30):
                idx = _rand_index(r, list(ref.shape))
                try:
                    want = ref[idx]
                except IndexError:
                    with pytest.raises(IndexError):
                        s[idx]
                    continue
                if _bounds_refused(idx, list(ref.shape)):
                    with pytest.raises(pagein.SliceError):
                        s[idx]
                    continue
                got = s[idx]
                _same(got, want)
                if torch is not None:
                    t = st[idx]
                    assert isinstance(t, torch.Tensor), (name, idx)
                    assert tuple(t.shape) == np.shape(want), (name, idx)
                    np.testing.assert_array_equal(t.numpy(), np.asarray(want))
                checked += 1
    assert checked > 500


def test_slice_issue_cases(tmp_path, rng):
    """The reported cases: all-integer indexes, 1-D s[1], 0-d s[()]."""
    p = str(tmp_path / "c.safetensors")
    raw = stref.random_tensor(rng, "F32", [6, 20, 3])
    stref.write(p, {"w": ("F32", [6, 20, 3], raw), "v": ("I64", [5], np.arange(5, dtype="<i8").tobytes()),
                    "z": ("F32", [], np.float32(2.5).tobytes())})
    ref = np.frombuffer(raw, "<f4").reshape(6, 20, 3)
    with pagein.safe_open(p, "np") as f:
        got = f.get_slice("w")[2, 3, 1]
        assert isinstance(got, np.float32) and got == ref[2, 3, 1]
        assert f.get_slice("w")[-1, -1, -1] == ref[-1, -1, -1]
        assert f.get_slice("v")[1] == 1 and isinstance(f.get_slice("v")[1], np.int64)
        assert f.get_slice("v")[-5] == 0
        assert f.get_slice("z")[()] == np.float32(2.5)
        z = f.get_slice("z")[...]
        assert isinstance(z, np.ndarray) and z.shape == () and z == 2.5
        np.testing.assert_array_equal(f.get_slice("w")[::-2, 5, ::-1], ref[::-2, 5, ::-1])
        with pytest.raises(IndexError):
            f.get_slice("v")[5]
        with pytest.raises(IndexError):
            f.get_slice("w")[1, 2, 3, 4]


def test_slice_torch_scalar(tmp_path):
    torch = pytest.importorskip("torch")
    p = str(tmp_path / "t.safetensors")
    stref.write(p, {"w": ("F32", [2, 3], np.arange(6, dtype="<f4").tobytes())})
    with pagein.safe_open(p, "pt") as f:
        t = f.get_slice("w")[1, 2]
        assert isinstance(t, torch.Tensor) and t.shape == () and t.item() == 5.0
        assert torch.equal(f.get_slice("w")[:, ::-1], torch.tensor([[2., 1., 0.], [5., 4., 3.]]))


@pytest.mark.parametrize("index,what", [
    ([0, 2], "list"), (np.array([0, 1]), "ndarray"), (np.array(1), "ndarray"), (True, "boolean"),
    (np.array([True, False, True, False]), "ndarray"), (1.0, "float"), ("a", "str"),
    ((0, [1]), "list"), (slice(0.5, 2), "float"), (slice(None, None, True), "bool")])
def test_slice_unsupported_index_is_type_error(tmp_path, index, what):
    p = str(tmp_path / "u.safetensors")
    stref.write(p, {"w": ("F32", [4, 3], np.zeros(12, "<f4").tobytes())})
    with pagein.safe_open(p, "np") as f:
        with pytest.raises(TypeError) as ei:
            f.get_slice("w")[index]
        assert what in str(ei.value)
        # lists raise safetensors' error class (pagein.Error) as well
        assert isinstance(ei.value, pagein.Error) == (what == "list")
