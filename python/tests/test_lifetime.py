"""Lifetime: arrays outlive the file object, closing is safe while views
exist, garbage collection, and the mapping goes when the last view goes."""
import gc
import threading
import weakref

import numpy as np
import pytest

import pagein
import stref
from conftest import mapped


@pytest.fixture
def model_file(tmp_path, rng):
    tensors = {"layers.%d.w" % i: ("F32", [64, 64], stref.random_tensor(rng, "F32", [64, 64])) for i in range(4)}
    tensors["embed"] = ("BF16", [16, 8], stref.random_tensor(rng, "BF16", [16, 8]))
    path = str(tmp_path / "m.safetensors")
    stref.write(path, tensors)
    return path, stref.read(path)[1]


def test_arrays_outlive_file_object(model_file):
    path, ref = model_file
    f = pagein.safe_open(path, "np")
    arrays = {k: f.get_tensor(k) for k in f.keys()}
    f.close()
    with pytest.raises(pagein.Error):
        f.get_tensor("embed")
    del f
    gc.collect()
    assert mapped(path) == 1  # still mapped: the arrays need it
    for k, a in arrays.items():
        assert a.tobytes() == ref[k][2].tobytes()


def test_mapping_released_when_last_view_goes(model_file):
    path, _ = model_file
    gc.collect()
    assert mapped(path) == 0
    with pagein.safe_open(path, "np") as f:
        assert mapped(path) == 1
        a = f.get_tensor("layers.0.w")
        b = f.get_tensor("embed")[2:5]  # a view of a view
        src = weakref.ref(f._src)
    assert mapped(path) == 1
    del a
    gc.collect()
    assert mapped(path) == 1 and src() is not None
    del b
    assert src() is None  # released by refcount, no gc needed
    assert mapped(path) == 0


def test_context_exit_without_views_unmaps(model_file):
    path, _ = model_file
    with pagein.safe_open(path, "np") as f:
        f.get_tensor("embed").sum()
    assert mapped(path) == 0


def test_slices_are_copies_and_do_not_hold_the_file(model_file):
    path, ref = model_file
    f = pagein.safe_open(path, "np")
    s = f.get_slice("layers.1.w")[3:5]
    assert s.flags.writeable and s.flags.owndata
    del f
    gc.collect()
    assert mapped(path) == 0
    np.testing.assert_array_equal(s, ref["layers.1.w"][2][3:5])


def test_reference_cycles_are_collected(model_file):
    path, _ = model_file

    class Holder:
        pass

    h = Holder()
    h.self = h
    h.f = pagein.safe_open(path, "np")
    h.a = h.f.get_tensor("layers.2.w")
    del h
    assert mapped(path) == 1
    gc.collect()
    assert mapped(path) == 0


def test_many_threads_share_one_file(model_file):
    path, ref = model_file
    f = pagein.safe_open(path, "np")
    errors = []

    def work():
        try:
            for _ in range(50):
                for k in ref:
                    assert f.get_tensor(k).tobytes() == ref[k][2].tobytes()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_torch_tensors_keep_the_file_alive(model_file):
    torch = pytest.importorskip("torch")
    path, ref = model_file
    f = pagein.safe_open(path, "pt")
    t = f.get_tensor("embed")
    assert t.dtype == torch.bfloat16
    src = weakref.ref(f._src)
    del f
    gc.collect()
    assert src() is not None and mapped(path) == 1
    assert t.view(torch.int16).numpy().tobytes() == ref["embed"][2].tobytes()
    u = t[1:3]  # a torch view keeps the storage, hence the file
    del t
    gc.collect()
    assert mapped(path) == 1
    del u
    gc.collect()
    assert src() is None and mapped(path) == 0
