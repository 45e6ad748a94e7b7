"""Models: open_model and Model (shards, GGUF split sets, load strategies,
the layer-by-layer prefetching iterator)."""

import operator as _operator
import os as _os
from collections.abc import Mapping as _Mapping

from . import _pagein
from ._tensor import _NAME, _DTYPE, _SHAPE
from ._opened import _Opened, _check_openable, _is_url, _residency, _names


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------

def _load_quietly(src, layer):
    # Lookahead is advice: a failure shows up in layer_wait on the caller.
    try:
        src.load_layers(layer, layer)
    except Exception:
        pass


class _TensorMap(_Mapping):
    """Model.tensors: a read-only mapping name -> tensor, in model order.
    Each lookup builds a fresh zero-copy view (cheap); nothing is cached, so
    dropping the arrays releases the memory."""

    def __init__(self, model):
        self._model = model

    def __getitem__(self, name):
        return self._model.get_tensor(name)

    def __iter__(self):
        return iter(self._model._names)

    def __len__(self):
        return len(self._model._names)

    def __contains__(self, name):
        return name in self._model._by_name

    def __repr__(self):
        return "<pagein tensors of %s: %d>" % (self._model.path, len(self))


class Model(_Opened):
    """A model over one file, a sharded safetensors checkpoint or a GGUF
    split set (use open_model())."""

    _what = "model"

    def __init__(self, path, strategy="auto", *, framework="np", device="cpu", copy=False,
                 prefetch=2, budget=0, threads=0, hints=0, lenient=False):
        self._setup(framework, device, copy)
        self._prefetch = prefetch
        self.path = _os.fsdecode(_os.fspath(path))
        _check_openable(self.path)
        self._table(_pagein.open_model(self.path, strategy=strategy, threads=threads,
                                       prefetch=prefetch, budget=budget or 0, hints=hints,
                                       lenient=lenient, writable=self._fw == "pt"))
        self._names = [r[_NAME] for r in self._recs]
        # A remote model prefetched under a budget (given, or chosen by
        # auto for a model larger than memory) reads layers into memory
        # that layer_done gives back, where it reads as zeros until read
        # again: arrays handed out are copies, so none of them changes
        # under the caller (include/pagein.h, pagein_model_tensor_data).
        if _is_url(self.path) and self.strategy == "prefetch" and (budget or strategy == "auto"):
            self._copy = True

    # -- tables --
    @property
    def tensors(self):
        return _TensorMap(self)

    @property
    def metadata(self):
        """Metadata as Python values (GGUF: int, float, bool, str, lists;
        safetensors: the __metadata__ strings). Shards' entries are merged,
        the first file winning. Same as metadata_typed()."""
        return self.metadata_typed()

    @property
    def strategy(self):
        return self._source().strategy()[0]

    @property
    def strategy_reason(self):
        """Why auto chose the strategy in effect."""
        return self._source().strategy()[1]

    @property
    def files(self):
        """Info dicts of the model's files, in shard order."""
        return self._source().files()

    @property
    def layer_count(self):
        return self._source().layer_count()

    def keys(self):
        return list(self._names)

    def dtype(self, name):
        """The file's dtype name of a tensor ("BF16", "Q8_0", ...)."""
        return self._rec(name)[_DTYPE]

    def shape(self, name):
        return list(self._rec(name)[_SHAPE])

    def wait(self, name):
        """Returns once tensor `name` is resident and gives it, while the
        prefetch pager may still be reading the rest of its layer (compute
        on a layer's first tensors while its last ones arrive;
        pagein_tensor_wait). With lazy it pages the tensor in now; with
        populate and read it returns at once."""
        self._rec(name)
        self._source().tensor_wait(name)
        return self.get_tensor(name)

    def load(self, names=None):
        """Makes the given tensors (default: all) resident now, in parallel."""
        self._source().load(_names(names))

    def warm(self, names=None):
        """Makes the given tensors (a name or a list; default: all) resident
        now, in parallel chunks, whatever the strategy (same as load())."""
        self._source().load(_names(names))

    def resident(self, names=None, layer=None):
        """Page-cache residency of the named tensors, of one layer (-1
        leading globals, 0..L-1, L trailing globals) or of every tensor: a
        dict with bytes, resident_bytes, pages, resident_pages, fraction.
        For the "read" strategy this is the page cache behind the copy."""
        return _residency(self._source().residency(_names(names), layer))

    def evict(self, names=None):
        """Drops the named tensors (default: all) from the page cache: this
        model's mapping stops pinning them and the kernel is told to drop
        them. Views stay valid (the data is read again on access)."""
        self._source().evict(_names(names))

    def lock(self, names=None):
        """mlock()s the named tensors (default: all) until unlock() or
        close; pagein.Error (PAGEIN_E_MEMLOCK) says how to raise the limit."""
        self._source().lock(_names(names))

    def unlock(self, names=None):
        self._source().unlock(_names(names))

    def layers(self, prefetch=None):
        """Iterates (layer, {name: tensor}) over the layers in order: the
        leading globals (layer -1), layers 0..L-1, then the trailing globals
        (layer L). Each layer is yielded once it is resident; asking for the
        next one marks the previous one done, so the pager moves on and,
        with a budget, releases it.

        prefetch: layers made resident ahead of the one being consumed. With
        the "prefetch" strategy the library's background pager does this,
        with the lookahead given to open_model(prefetch=...) (default 2);
        passing another value here raises ValueError. With the other
        strategies a helper thread loads the next `prefetch` layers
        (pagein_model_load_layers, GIL released) while the caller works;
        0 turns that off."""
        src = self._source()
        pager = src.strategy()[0] == "prefetch"
        if prefetch is None:
            prefetch = self._prefetch
        prefetch = _operator.index(prefetch)
        if prefetch < 0:
            raise ValueError("prefetch must be >= 0, not %d" % prefetch)
        if pager and prefetch != self._prefetch:
            raise ValueError("the prefetch strategy's lookahead is set at open: "
                             "open_model(..., prefetch=%d)" % prefetch)
        n = src.layer_count()
        order = [l for l in range(-1, n + 1) if src.layer_tensors(l)]
        ahead = None
        if not pager and prefetch and len(order) > 1:
            import concurrent.futures
            ahead = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="pagein-ahead")
        try:
            for i, layer in enumerate(order):
                if ahead is not None:
                    # keep layers i+1 .. i+prefetch on their way
                    for j in (range(1, prefetch + 1) if i == 0 else (i + prefetch,)):
                        if j < len(order):
                            ahead.submit(_load_quietly, src, order[j])
                src.layer_wait(layer)
                try:
                    yield layer, self._tensors([r for r in src.layer_tensors(layer) if r[_NAME] in self._by_name])
                finally:
                    src.layer_done(layer)
        finally:
            if ahead is not None:
                ahead.shutdown(wait=True, cancel_futures=True)

    def __repr__(self):
        state = "closed" if self._src is None else "%d tensors, %s" % (len(self._names), self.strategy)
        return "<pagein.Model %s (%s)>" % (self.path, state)


def open_model(path, strategy="auto", **kw):
    """Opens a model: a safetensors or GGUF file, a sharded checkpoint (its
    index.json or the directory), a GGUF split set or a directory.

    strategy: "auto", "lazy", "populate", "prefetch" or "read". "lazy" over
    a URL opens the headers only: get_tensor reads that tensor through the
    source into a private copy, and wait()/layers() raise (nothing resident).
    Keywords: framework ("np" default, or "pt"), device, copy, prefetch
    (layers kept ahead by the pager, default 2), budget (bytes resident at
    most under prefetch; 0 = unlimited), threads, hints, lenient.
    """
    return Model(path, strategy, **kw)
