"""PyTorch checkpoints (torch.save zip) through safe_open/load_file: the
same tensors as torch.load, strided views included, zero copy."""
import numpy as np
import pytest

import pagein

torch = pytest.importorskip("torch")


@pytest.fixture
def checkpoint(tmp_path):
    g = torch.Generator().manual_seed(7)
    base = torch.randn(6, 5, generator=g)
    sd = {
        "w": torch.randn(4, 3, generator=g),
        "bf": torch.randn(3, 2, generator=g).to(torch.bfloat16),
        "i64": torch.arange(5),
        "t": base.t(),                  # transpose: strided
        "rows": base[1:5:2],            # strided slice sharing base's storage
        "base": base,
        "exp": torch.randn(3, 1, generator=g).expand(3, 4),  # stride 0
        "scalar": torch.tensor(1.5),
        "tied": None,
    }
    sd["tied"] = sd["w"]                # shared storage
    path = str(tmp_path / "ckpt.pt")
    torch.save(sd, path)
    return path, torch.load(path)


def test_torch_checkpoint_equals_torch_load(checkpoint):
    path, ref = checkpoint
    with pagein.safe_open(path, framework="pt") as f:
        assert f.info()["format"] == "torch"
        assert sorted(f.keys()) == sorted(ref)
        for name, r in ref.items():
            t = f.get_tensor(name)
            assert t.dtype == r.dtype and t.shape == r.shape, name
            assert torch.equal(t, r), name
        # zero copy: tied tensors share memory, strided ones are views
        assert f.get_tensor("tied").data_ptr() == f.get_tensor("w").data_ptr()
        assert f.get_tensor("t").stride() == ref["t"].stride()
        np.testing.assert_array_equal(f.get_slice("t")[1:3].numpy(), ref["t"][1:3].numpy())


def test_torch_checkpoint_numpy(checkpoint):
    path, ref = checkpoint
    got = pagein.load_file(path, framework="np")
    for name, r in ref.items():
        a = got[name]
        assert not a.flags.writeable
        if r.dtype == torch.bfloat16:
            assert a.dtype == np.uint16
            assert torch.equal(torch.from_numpy(a.astype(np.int16)).view(torch.bfloat16), r)
        else:
            np.testing.assert_array_equal(a, r.numpy(), err_msg=name)


def test_convert_checkpoint_with_save_file(checkpoint, tmp_path):
    path, ref = checkpoint
    out = str(tmp_path / "ckpt.safetensors")
    # tied and overlapping tensors share storage: refused as safetensors does
    # (they used to be written twice)
    with pytest.raises(RuntimeError, match="share memory") as ei:
        pagein.save_file(pagein.load_file(path), out)
    assert "'tied', 'w'" in str(ei.value) and "'base', 't'" in str(ei.value)
    pagein.save_file({k: v.clone() for k, v in pagein.load_file(path).items()}, out)
    got = pagein.load_file(out)
    for name, r in ref.items():
        assert torch.equal(got[name], r), name
