"""Page cache through the library: resident(), evict(), warm() on files and
models; get_slice residency checked through the library as well."""
import numpy as np
import pytest

import pagein
import stref

MB = 1 << 20


def write_model(path, rng):
    tensors = {"model.layers.%d.w" % i: ("F32", [256, 1024], stref.random_tensor(rng, "F32", [256, 1024]))
               for i in range(4)}  # 1 MiB each
    stref.write(path, tensors, sync=True)
    return tensors


def dropped(res):
    return res["resident_bytes"] <= res["bytes"] // 8


def test_model_warm_resident_evict(tmp_path, rng):
    path = str(tmp_path / "m.safetensors")
    ref = write_model(path, rng)
    with pagein.open_model(path, strategy="lazy") as m:
        m.evict()
        r = m.resident()
        assert r["bytes"] == 4 * MB
        if not dropped(r):
            pytest.skip("this filesystem keeps pages after POSIX_FADV_DONTNEED")
        m.warm(["model.layers.2.w"])
        r2 = m.resident("model.layers.2.w")
        assert r2["fraction"] == 1.0 and r2["bytes"] == MB
        assert m.resident(layer=2)["resident_bytes"] == MB
        m.warm()
        assert m.resident()["fraction"] == 1.0
        a = m.tensors["model.layers.1.w"]
        m.evict("model.layers.1.w")
        assert m.resident("model.layers.1.w")["resident_bytes"] < MB
        assert a.tobytes() == ref["model.layers.1.w"][2]  # views refault after evict


def test_file_resident_evict_and_slice(tmp_path, rng):
    path = str(tmp_path / "f.safetensors")
    write_model(path, rng)
    with pagein.safe_open(path, "np") as f:
        f.evict()
        if not dropped(f.resident()):
            pytest.skip("this filesystem keeps pages after POSIX_FADV_DONTNEED")
        part = f.get_slice("model.layers.3.w")[100:104]  # 16 KiB of 1 MiB
        assert part.shape == (4, 1024)
        r = f.resident("model.layers.3.w")
        assert 16 * 1024 <= r["resident_bytes"] <= 512 * 1024


def test_lock_unlock(tmp_path, rng):
    path = str(tmp_path / "l.safetensors")
    write_model(path, rng)
    with pagein.open_model(path) as m:
        try:
            m.lock(["model.layers.0.w"])
        except pagein.Error as e:
            assert "memlock" in str(e).lower() or e.errno
            pytest.skip("mlock not allowed here: %s" % e)
        assert m.resident("model.layers.0.w")["fraction"] == 1.0
        m.unlock(["model.layers.0.w"])
