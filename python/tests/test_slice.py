"""get_slice: shape and dtype without reading, indexing like numpy, and
reading only the pages the selection spans (checked with mincore)."""
import ctypes
import mmap
import os

import numpy as np
import pytest

import pagein
import stref

MB = 1 << 20
PAGE = mmap.PAGESIZE


def test_slice_matches_numpy_indexing(tmp_path, rng):
    p = str(tmp_path / "s.safetensors")
    raw = stref.random_tensor(rng, "F32", [10, 6, 4])
    stref.write(p, {"w": ("F32", [10, 6, 4], raw), "v": ("I64", [5], stref.random_tensor(rng, "I64", [5]))})
    ref = np.frombuffer(raw, "<f4").reshape(10, 6, 4)
    with pagein.safe_open(p, "np") as f:
        s = f.get_slice("w")
        assert s.get_shape() == [10, 6, 4] and s.get_dtype() == "F32" and len(s) == 10
        for idx in [slice(None), slice(2, 5), 3, (slice(1, 9), slice(0, 3)), (Ellipsis, 1),
                    (slice(None), 2, slice(1, 3)), slice(8, 10), slice(0, 10, 3), -1]:
            got = s[idx]
            np.testing.assert_array_equal(got, ref[idx])
            assert got.flags.writeable
        with pytest.raises(pagein.SliceError, match="dimension #0 of size 10"):
            s[8:100]  # numpy clips; safetensors (and pagein) refuse
        assert f.get_slice("v")[1:3].tolist() == np.frombuffer(stref.read(p)[1]["v"][2], np.int64)[1:3].tolist()


def test_slice_bf16_and_torch(tmp_path, rng):
    torch = pytest.importorskip("torch")
    p = str(tmp_path / "b.safetensors")
    raw = stref.random_tensor(rng, "BF16", [8, 4])
    stref.write(p, {"b": ("BF16", [8, 4], raw)})
    with pagein.safe_open(p, "pt") as f:
        full = f.get_tensor("b")
        part = f.get_slice("b")[2:6]
        assert part.dtype == torch.bfloat16 and part.shape == (4, 4)
        assert torch.equal(part, full[2:6])
        part.add_(1)  # slices are private copies: writable
    with pagein.safe_open(p, "np") as f:
        assert f.get_slice("b")[2:6].dtype == np.uint16


# ---- residency -------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]


def resident(path):
    """Per page of path: 1 if in the page cache (mincore on a fresh mapping)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert addr not in (None, ctypes.c_void_p(-1).value)
        try:
            vec = (ctypes.c_ubyte * ((size + PAGE - 1) // PAGE))()
            assert _libc.mincore(addr, size, vec) == 0
            return np.frombuffer(vec, np.uint8) & 1
        finally:
            _libc.munmap(addr, size)
    finally:
        os.close(fd)


def evict(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def test_slice_reads_only_the_selected_rows(tmp_path):
    # 16 MiB F32 [4096, 1024] (4 KiB rows) after a 10 MiB filler (U64 sorts
    # first in the official layout), so that the read-around of the fault
    # on the header (read_ahead_kb, 8 MiB here) cannot reach it.
    p = str(tmp_path / "big.safetensors")
    rows, cols = 4096, 1024
    big = np.arange(rows * cols, dtype="<f4").tobytes()
    stref.write(p, {"filler": ("U64", [10 * MB // 8], bytes(10 * MB)), "big": ("F32", [rows, cols], big)})
    del big
    evict(p)
    before = resident(p)
    with pagein.safe_open(p, "np") as f:
        info = f.tensor_info("big")
        assert info["offset"] >= 10 * MB
        first, last = info["offset"] // PAGE, (info["offset"] + info["nbytes"]) // PAGE
        if before[first:last].sum() > 16:
            pytest.skip("this filesystem does not drop cached pages on POSIX_FADV_DONTNEED")
        lo_row, hi_row = 3000, 3016  # 16 rows = 64 KiB
        got = f.get_slice("big")[lo_row:hi_row]
    np.testing.assert_array_equal(got.reshape(-1)[:3], [lo_row * cols, lo_row * cols + 1, lo_row * cols + 2])
    after = resident(p)
    sel_first = (info["offset"] + lo_row * cols * 4) // PAGE
    sel_last = (info["offset"] + hi_row * cols * 4 + PAGE - 1) // PAGE
    assert after[sel_first:sel_last].all(), "the selected rows were read"
    extra = int(after[first:last].sum()) - (sel_last - sel_first)
    # Kernel readahead may add a little; a whole read-around window (often
    # MBs) or the whole tensor (16 MiB) would be far more.
    assert extra * PAGE <= 512 * 1024, "read %d KiB beyond the 64 KiB selected" % (extra * PAGE // 1024)
