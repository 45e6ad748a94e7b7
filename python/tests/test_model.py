"""open_model: single files, sharded checkpoints, GGUF; every strategy gives
the same bytes; layers(); metadata; lifetime of views after the model goes."""
import gc
import json
import os
import weakref

import numpy as np
import pytest

import pagein
import stref
from conftest import mapped, real_files

STRATEGIES = ["auto", "lazy", "populate", "prefetch", "read"]


def make_model(dirpath, rng, layers=3, shards=1):
    """A small HF-style model; with shards > 1 a sharded checkpoint with an
    index. Returns (path to open, {name: raw bytes})."""
    names = ["model.embed_tokens.weight"]
    for i in range(layers):
        names += ["model.layers.%d.self_attn.q_proj.weight" % i, "model.layers.%d.mlp.up_proj.weight" % i]
    names += ["model.norm.weight", "lm_head.weight"]
    tensors = {}
    for n in names:
        shape = [8] if n.endswith("norm.weight") else [16, 8]
        dtype = "BF16" if "mlp" in n else "F32"
        tensors[n] = (dtype, shape, stref.random_tensor(rng, dtype, shape))
    if shards == 1:
        path = os.path.join(dirpath, "model.safetensors")
        stref.write(path, tensors, {"format": "pt"})
        return path, tensors
    weight_map = {}
    per = (len(names) + shards - 1) // shards
    for s in range(shards):
        fname = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
        part = {n: tensors[n] for n in names[s * per:(s + 1) * per]}
        stref.write(os.path.join(dirpath, fname), part, {"format": "pt"})
        weight_map.update({n: fname for n in part})
    index = os.path.join(dirpath, "model.safetensors.index.json")
    with open(index, "w") as fh:
        json.dump({"metadata": {"total_size": sum(len(t[2]) for t in tensors.values())},
                   "weight_map": weight_map}, fh, indent=2, sort_keys=True)
    return index, tensors


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("shards", [1, 2])
def test_strategies_give_the_same_bytes(tmp_path, rng, strategy, shards):
    path, ref = make_model(str(tmp_path), rng, shards=shards)
    with pagein.open_model(path, strategy=strategy) as m:
        if strategy != "auto":
            assert m.strategy == strategy
        else:
            assert m.strategy in STRATEGIES[1:] and m.strategy_reason
        assert len(m.files) == shards
        assert set(m.tensors) == set(ref) and len(m.tensors) == len(ref)
        for name, (dtype, shape, raw) in ref.items():
            a = m.tensors[name]
            assert a.tobytes() == raw and list(a.shape) == shape
            assert m.dtype(name) == dtype
        assert m.metadata.get("format") == "pt"


def test_layers_in_order_with_each_strategy(tmp_path, rng):
    path, ref = make_model(str(tmp_path), rng, layers=4)
    for strategy in STRATEGIES:
        with pagein.open_model(path, strategy=strategy, budget=1 << 20) as m:
            assert m.layer_count == 4
            seen = []
            for layer, tensors in m.layers():
                seen.append(layer)
                for name, a in tensors.items():
                    assert a.tobytes() == ref[name][2]
                    if 0 <= layer < 4:
                        assert ".layers.%d." % layer in name
            assert seen == [-1, 0, 1, 2, 3, 4], strategy
            assert sum(len(t) for _, t in m.layers()) == len(ref)


def test_layers_prefetch_argument(tmp_path, rng):
    path, ref = make_model(str(tmp_path), rng)
    with pagein.open_model(path, strategy="lazy") as m:
        got = {}
        for _, tensors in m.layers(prefetch=3):
            got.update({k: v.tobytes() for k, v in tensors.items()})
        assert got == {k: v[2] for k, v in ref.items()}
        assert len(list(m.layers(prefetch=0))) == 5
    with pagein.open_model(path, strategy="prefetch", prefetch=1) as m:
        assert len(list(m.layers(prefetch=1))) == 5
        with pytest.raises(ValueError):
            next(m.layers(prefetch=4))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_wait_per_tensor(tmp_path, rng, strategy):
    """Model.wait(name): the tensor, resident, in layer order with every
    strategy (prefetch: before its layer is complete); unknown names raise."""
    path, ref = make_model(str(tmp_path), rng, layers=4)
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    with pagein.open_model(path, strategy=strategy) as m:
        # residency says something only where the file could be evicted
        # (not tmpfs) and the data stays in the mapping (not read/auto)
        check = strategy in ("lazy", "prefetch", "populate")
        if strategy == "lazy":
            check = m.resident()["fraction"] < 0.5
        for layer in range(-1, m.layer_count + 1):
            for name, *_ in m._source().layer_tensors(layer):
                a = m.wait(name)
                assert a.tobytes() == ref[name][2]
                if check:
                    assert m.resident([name])["fraction"] == 1.0, name
        with pytest.raises(pagein.NotFoundError):
            m.wait("nope")


def test_torch_model(tmp_path, rng):
    torch = pytest.importorskip("torch")
    path, ref = make_model(str(tmp_path), rng, shards=2)
    with pagein.open_model(path, framework="pt") as m:
        t = m.tensors["model.layers.1.mlp.up_proj.weight"]
        assert t.dtype == torch.bfloat16
        assert t.view(torch.int16).numpy().tobytes() == ref["model.layers.1.mlp.up_proj.weight"][2]


def test_model_deleted_while_views_exist(tmp_path, rng):
    path, ref = make_model(str(tmp_path), rng, shards=2)
    m = pagein.open_model(path, strategy="prefetch")
    keep = {k: m.tensors[k] for k in ["model.embed_tokens.weight", "lm_head.weight"]}
    src = weakref.ref(m._src)
    shard_paths = [f["path"] for f in m.files]
    m.close()
    with pytest.raises(pagein.Error):
        m.tensors["lm_head.weight"]
    del m
    gc.collect()
    assert src() is not None
    for k, a in keep.items():
        assert a.tobytes() == ref[k][2]
    del a
    keep.clear()
    gc.collect()
    assert src() is None
    assert all(mapped(p) == 0 for p in shard_paths)


def test_gguf_model_metadata_is_typed():
    path = [p for p in real_files("gguf", ".gguf") if "q8_0" in p][0]
    with pagein.open_model(path) as m:
        md = m.metadata
        assert md["general.architecture"] == "llama"
        assert isinstance(md["llama.block_count"], int) and md["llama.block_count"] == m.layer_count
        assert isinstance(md["tokenizer.ggml.tokens"], list) and isinstance(md["tokenizer.ggml.tokens"][0], str)
        assert isinstance(md["tokenizer.ggml.scores"][0], float)
        assert m.dtype("blk.0.attn_q.weight") == "Q8_0"
        assert m.tensors["blk.0.attn_q.weight"].dtype == np.uint8


def test_model_errors(tmp_path, rng):
    with pytest.raises(pagein.FileError):
        pagein.open_model(str(tmp_path / "missing.safetensors"))
    path, _ = make_model(str(tmp_path), rng, shards=2)
    os.remove(os.path.join(str(tmp_path), "model-00002-of-00002.safetensors"))
    with pytest.raises(pagein.Error) as ei:
        pagein.open_model(path)
    assert "model-00002-of-00002.safetensors" in str(ei.value)
    with pytest.raises(pagein.FormatError):
        pagein.open_model(path, strategy="fastest")
