"""pagein.fsspec: an fsspec filesystem on pagein's sources and range engine.

    import fsspec, pagein.fsspec            # registers the "pagein" protocol

    fs = fsspec.filesystem("pagein")
    parts = fs.cat_ranges(["https://host/model.safetensors"] * 3, [0, 4096, 1 << 20], [8, 8192, 2 << 20])
    with fsspec.open("pagein::https://host/data.json") as f:   # or "pagein://https://host/..."
        json.load(f)

    pagein.fsspec.register(override=True)   # opt-in: s3://, gs://, hf://,
    fsspec.open("s3://bucket/key")          # http(s):// all go through pagein

Paths are local paths or URLs that pagein's sources read (http(s)://,
s3://, gs://, hf://ORG/NAME[@REV]/PATH; docs/REMOTE.md for credentials and
endpoints). Read-only.

- cat_ranges: every range of every file in one run of pagein's range
  engine (pagein_source_read_ranges): requests sorted, neighbours within
  max_gap merged (up to max_block), queue_depth of them in flight (remote
  sources: that many connections), the GIL released. cat_file and cat of
  several paths are cat_ranges.
- open: a read-only AbstractBufferedFile whose read-ahead buffer is filled
  by the engine (a block is cut into requests read in parallel).
- info, ls, find, glob: local files by os.stat/scandir; s3://, gs:// and
  hf:// by their listing (one ListObjectsV2 walk / one Hub listing per call);
  HTTP has no listing (info of a URL works, ls of one gives that file).
- get: remote files through pagein.pull (parallel ranges, verified,
  atomically renamed); local files copied.

fsspec's conventions (the docstrings of AbstractFileSystem are the spec):
start/end like Python slices (negative from the end, None for the file's
ends, clipped to the size), cat_ranges(on_error="return") puts the
exception of a failed path in its place, missing paths raise
FileNotFoundError. See docs/PYTHON.md.
"""
import errno as _errno
import os as _os
import shutil as _shutil
import stat as _stat
import threading as _threading
from collections import OrderedDict as _OrderedDict

import fsspec as _fsspec
from fsspec.spec import AbstractBufferedFile, AbstractFileSystem

import pagein as _p
from pagein import _pagein

__all__ = ["PageinFileSystem", "PageinFile", "register", "unregister"]

# fsspec protocol names whose scheme differs in pagein's URLs (s3a -> s3,
# gcs -> gs); every other protocol name is its scheme
_ALIASES = _p._FSSPEC_ALIASES


# storage options of fsspec itself (AbstractFileSystem and its instance
# cache) and of the files it opens, which fsspec.open passes along
_GENERIC_OPTIONS = frozenset(("skip_instance_cache", "use_listings_cache", "listings_expiry_time", "max_paths",
                              "asynchronous", "loop", "block_size", "cache_type", "cache_options"))


# PAGEIN_E_UNSUPPORTED: the URL's source has no listing (HTTP), or this
# build reads no remote source; such a prefix lists nothing
_E_UNSUPPORTED = -30020


def _cannot_list(e):
    return getattr(e, "code", None) == _E_UNSUPPORTED or "NoSuchBucket" in str(e) or "404" in str(e)


def _is_remote(path):
    """True for a URL one of pagein's remote sources reads: the library's
    rule (pagein_is_url), not a list of schemes here."""
    return _pagein.is_url(path)


def _scheme(proto):
    """The URL scheme pagein reads for an fsspec protocol name."""
    return _ALIASES.get(proto.lower(), proto.lower())


def _redact(path):
    """path as messages may show it: a URL's user:pass@ and signature or
    token query values redacted (no secret in an exception)."""
    return _pagein.url_redact(path) if isinstance(path, str) else path


def _missing(path, cause=None):
    e = FileNotFoundError(_errno.ENOENT, "No such file or directory", _redact(path))
    if cause is not None:
        e.__cause__ = cause
    return e


class PageinFileSystem(AbstractFileSystem):
    """fsspec filesystem over pagein's sources (see the module docstring).

    Options: queue_depth (requests in flight; remote: connections; default
    128, about fsspec HTTP's 100 aiohttp connections), max_gap (merge ranges closer than this, default 64 KiB), max_block
    (never merge beyond, default 8 MiB), request_bytes (open(): a read-ahead
    block is cut into requests of this size, default 2 MiB). fsspec's
    chaining passes target_protocol/fo ("pagein::s3://bucket/key")."""

    protocol = ("pagein",)
    root_marker = ""
    _MAX_SOURCES = 64  # remote sources kept open (connections reused)
    _default_scheme = None  # set on the classes register(override=True) makes

    def __init__(self, *args, queue_depth=128, max_gap=64 << 10, max_block=8 << 20, request_bytes=2 << 20,
                 target_protocol=None, target_options=None, fo=None, **kwargs):
        # credentials and endpoints come from the environment (docs/REMOTE.md):
        # an option meant for s3fs/gcsfs/HTTP (key, secret, token, anon,
        # client_kwargs={"endpoint_url": ...}, headers) would otherwise be
        # dropped silently, and the read would go to another endpoint with
        # other credentials than the caller asked for
        unknown = sorted(k for k in kwargs if k not in _GENERIC_OPTIONS)
        if unknown:
            raise ValueError("pagein.fsspec: unsupported storage option%s %s: pagein takes credentials and "
                             "endpoints from the environment (AWS_*, HF_TOKEN; see "
                             "docs/REMOTE.md)" % ("s" if len(unknown) > 1 else "", ", ".join(unknown)))
        super().__init__(*args, **kwargs)
        self.queue_depth = int(queue_depth)
        self.max_gap = int(max_gap)
        self.max_block = int(max_block)
        self.request_bytes = int(request_bytes)
        self.target_protocol = target_protocol
        self.fo = fo
        # the remote sources opened last (least recently used dropped
        # beyond _MAX_SOURCES: each holds its connections, about 5
        # descriptors, and the filesystem object lives as long as fsspec's
        # instance cache; a dropped one closes when nothing reads it)
        self._srcs = _OrderedDict()
        self._lock = _threading.Lock()

    # ---- paths -----------------------------------------------------------
    @classmethod
    def _strip_protocol(cls, path):
        """The path pagein reads: a URL kept whole, "pagein://X" -> X,
        "file://X" -> X; on the classes registered for a protocol (s3, ...)
        a bare "bucket/key" gets that protocol's scheme back."""
        if isinstance(path, (list, tuple)):
            return [cls._strip_protocol(p) for p in path]
        path = _os.fspath(path)
        if path.startswith("pagein://"):
            path = path[len("pagein://"):]
        if path.startswith("file://"):
            path = path[len("file://"):]
        scheme, sep, rest = path.partition("://")
        if sep and _is_remote("%s://%s" % (_scheme(scheme), rest)):
            return "%s://%s" % (_scheme(scheme), rest)
        if cls._default_scheme and not sep:
            return "%s://%s" % (cls._default_scheme, path)
        return path.rstrip("/") if len(path) > 1 else path

    def _url(self, path):
        """A path or URL as pagein opens it (chaining: fo and target_protocol)."""
        path = self._strip_protocol(path)
        if path == "" and self.fo:
            path = self._strip_protocol(self.fo)
        if not _is_remote(path) and self.target_protocol and self.target_protocol not in ("file", "local"):
            path = "%s://%s" % (_scheme(self.target_protocol), path)
        return path

    def unstrip_protocol(self, name):
        return name if _is_remote(name) or self._default_scheme else "pagein://" + name

    # ---- sources ---------------------------------------------------------
    def _source(self, url):
        """The open source of a URL (kept: connections are reused) or a
        local path (opened for the call). FileNotFoundError when missing."""
        if _is_remote(url):
            with self._lock:
                s = self._srcs.get(url)
                if s is not None:
                    self._srcs.move_to_end(url)
            if s is not None:
                return s
        try:
            s = _pagein.source_open(url)
        except _p.NotFoundError as e:  # 404 / NoSuchKey
            raise _missing(url, e) from None
        except _p.FileError as e:
            if e.errno in (_errno.ENOENT, _errno.ENOTDIR):
                raise _missing(url, e) from None
            if e.errno == _errno.EISDIR:
                raise IsADirectoryError(_errno.EISDIR, "Is a directory", _redact(url)) from None
            raise
        except _p.FormatError as e:
            if "404" in str(e) or "NoSuchKey" in str(e) or "Not Found" in str(e):
                raise _missing(url, e) from None
            raise
        if _is_remote(url):
            with self._lock:
                s = self._srcs.setdefault(url, s)
                self._srcs.move_to_end(url)
                while len(self._srcs) > self._MAX_SOURCES:
                    self._srcs.popitem(last=False)
        return s

    def invalidate_cache(self, path=None):
        with self._lock:
            if path is None:
                self._srcs.clear()
            else:
                self._srcs.pop(self._url(path), None)
        super().invalidate_cache(path)

    def _read(self, srcs, files, offsets, lengths, max_gap=None):
        """One engine run: bytes of each (file, offset, length)."""
        parts, _stats = _pagein.source_read_ranges(srcs, files, offsets, lengths, queue_depth=self.queue_depth,
                                                   max_gap=self.max_gap if max_gap is None else max(1, int(max_gap)),
                                                   max_block=self.max_block)
        return parts

    # ---- reading ---------------------------------------------------------
    @staticmethod
    def _span(size, start, end):
        """[start, end) of a file of size bytes, fsspec's rules: None for the
        file's ends, negative from the end, clipped to the file."""
        start = 0 if start is None else int(start)
        end = size if end is None else int(end)
        if start < 0:
            start = max(0, size + start)
        if end < 0:
            end = max(0, size + end)
        start, end = min(start, size), min(end, size)
        return start, max(start, end)

    def cat_ranges(self, paths, starts, ends, max_gap=None, on_error="return", **kwargs):
        """Byte ranges of one or more files, all read in one engine run.

        paths: list of paths; starts, ends: an int (None) for every path or
        a list of them, with fsspec's slice rules. max_gap: merge ranges
        closer than this many bytes (default: the filesystem's max_gap).
        on_error="return" puts a failed path's exception in its place;
        anything else raises it. Returns a list of bytes."""
        if not isinstance(paths, list):
            raise TypeError("cat_ranges: paths must be a list")
        if not isinstance(starts, list):
            starts = [starts] * len(paths)
        if not isinstance(ends, list):
            ends = [ends] * len(paths)
        if len(starts) != len(paths) or len(ends) != len(paths):
            raise ValueError("cat_ranges: paths, starts and ends differ in length")
        out = [None] * len(paths)
        srcs, index, failed = [], {}, {}
        files, offs, lens, where = [], [], [], []
        for i, (p, s, e) in enumerate(zip(paths, starts, ends)):
            try:
                url = self._url(p)
                if url in failed:  # one open per path: its ranges share the failure
                    raise failed[url]
                k = index.get(url)
                if k is None:
                    try:
                        src = self._source(url)
                    except Exception as ex:
                        failed[url] = ex
                        raise
                    k = index[url] = len(srcs)
                    srcs.append(src)
                size = _pagein.source_info(srcs[k])[0]
                a, b = self._span(size, s, e)
            except Exception as ex:
                if on_error != "return":
                    raise
                out[i] = ex
                continue
            if b == a:
                out[i] = b""
                continue
            files.append(k)
            offs.append(a)
            lens.append(b - a)
            where.append(i)
        if where:
            try:
                parts = self._read(srcs, files, offs, lens, max_gap)
            except Exception:
                if on_error != "return":
                    raise
                parts = None
            if parts is None:  # which ranges failed: one by one
                for j, i in enumerate(where):
                    try:
                        out[i] = self._read([srcs[files[j]]], [0], [offs[j]], [lens[j]])[0]
                    except Exception as ex:
                        out[i] = ex
            else:
                for j, i in enumerate(where):
                    out[i] = parts[j]
        return out

    def cat_file(self, path, start=None, end=None, **kwargs):
        """The bytes [start, end) of a file (fsspec's slice rules)."""
        r = self.cat_ranges([path], [start], [end], on_error="raise")[0]
        return r

    def cat(self, path, recursive=False, on_error="raise", **kwargs):
        """The contents of one file (bytes) or of several (a dict path ->
        bytes, all read in one engine run); on_error "raise", "omit" or
        "return" as fsspec documents."""
        paths = self.expand_path(path, recursive=recursive)
        if len(paths) > 1 or isinstance(path, list) or paths[0] != self._strip_protocol(path):
            files = [p for p in paths if not (recursive and self.isdir(p))]
            got = self.cat_ranges(files, None, None, on_error="raise" if on_error == "raise" else "return")
            return {p: g for p, g in zip(files, got) if not (on_error == "omit" and isinstance(g, Exception))}
        return self.cat_file(paths[0])

    # ---- metadata ----------------------------------------------------------
    def _local_info(self, path, st=None):
        st = st or _os.stat(path)
        kind = "directory" if _stat.S_ISDIR(st.st_mode) else "file" if _stat.S_ISREG(st.st_mode) else "other"
        return {"name": path, "size": st.st_size if kind == "file" else 0, "type": kind, "mtime": st.st_mtime}

    def _listing(self, url):
        """Object URLs under a remote prefix; [] where its source cannot
        list (http) or the bucket or prefix is missing."""
        try:
            return _pagein.source_list(url)
        except _p.Error as e:
            if _cannot_list(e):
                return []
            raise

    def _entries(self, url):
        """{object URL: info dict} under a remote prefix from one listing:
        the size and identity as listed (None where the listing does not
        state a size: info() opens that object); {} where its source
        cannot list (http) or the bucket or prefix is missing."""
        try:
            got = _pagein.source_list_entries(url)
        except _p.Error as e:
            if _cannot_list(e):
                return {}
            raise
        out = {}
        for name, size, ident, mtime in got:
            d = {"name": name, "size": size, "type": "file"}
            if ident:
                d["identity"] = ident
            if mtime is not None:
                d["mtime"] = mtime
            out[name] = d
        return out

    def _listed_info(self, name, listed):
        """A listed object's info: the listing's word when it states a size
        (no request), else one open."""
        d = listed.get(name)
        return d if d is not None and d["size"] is not None else self.info(name)

    def _prefix_of(self, url):
        """The listing prefix of a directory-like URL (hf: the repo root)."""
        return url.rstrip("/") + "/"

    def info(self, path, **kwargs):
        """{"name", "size", "type": "file" | "directory", ...}; remote files
        by one open (size, ETag as "identity"), remote directories by their
        listing. FileNotFoundError when neither."""
        url = self._url(path)
        if not _is_remote(url):
            try:
                return self._local_info(url)
            except FileNotFoundError:
                raise _missing(url) from None
        try:
            src = self._source(url)
            size, ident, _ = _pagein.source_info(src)
            return {"name": url, "size": size, "type": "file", "identity": ident}
        except (FileNotFoundError, IsADirectoryError):
            pass  # no object: maybe a prefix; other failures (network, auth) propagate
        if self._listing(self._prefix_of(url)):
            return {"name": url, "size": 0, "type": "directory"}
        raise _missing(url)

    def ls(self, path, detail=True, **kwargs):
        """The entries directly under path (a file lists itself)."""
        url = self._url(path)
        if not _is_remote(url):
            if not _os.path.exists(url):
                raise _missing(url)
            if not _os.path.isdir(url):
                out = [self._local_info(url)]
            else:
                out = []
                with _os.scandir(url) as it:
                    for e in sorted(it, key=lambda e: e.name):
                        full = _os.path.join(url, e.name)
                        try:
                            out.append(self._local_info(full, e.stat()))
                        except OSError:
                            continue
            return out if detail else [o["name"] for o in out]
        prefix = self._prefix_of(url)
        listed = self._entries(prefix)
        names = list(listed)
        if not names:
            info = self.info(url)
            return [info] if detail else [info["name"]]
        seen, out = set(), []
        for full in sorted(names):
            if not full.startswith(prefix):
                continue
            head, sep, _ = full[len(prefix):].partition("/")
            name = prefix + head
            if name in seen:
                continue
            seen.add(name)
            if sep:
                out.append({"name": name, "size": 0, "type": "directory"})
            else:
                out.append(self._listed_info(name, listed) if detail else {"name": name})
        return out if detail else [o["name"] for o in out]

    def find(self, path, maxdepth=None, withdirs=False, detail=False, **kwargs):
        """Every file under path (one listing where the source lists, sizes
        as listed; a source that cannot list gives the object itself;
        os.walk locally)."""
        url = self._url(path)
        if not _is_remote(url) or maxdepth is not None or withdirs:
            return super().find(path, maxdepth=maxdepth, withdirs=withdirs, detail=detail, **kwargs)
        prefix = self._prefix_of(url)
        listed = self._entries(prefix)
        names = sorted(n for n in listed if n.startswith(prefix))
        if not names:
            try:
                info = self.info(url)
            except FileNotFoundError:
                return {} if detail else []
            return {url: info} if detail else [url]
        if detail:
            return {n: self._listed_info(n, listed) for n in names}
        return names

    def ukey(self, path):
        """The source's identity (local: dev:ino:size:mtime; remote: ETag)."""
        return _pagein.source_info(self._source(self._url(path)))[1]

    def size(self, path):
        return self.info(path)["size"]

    # ---- files ----------------------------------------------------------------
    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None, **kwargs):
        if mode != "rb":
            raise NotImplementedError("pagein.fsspec is read-only (mode %r)" % (mode,))
        return PageinFile(self, path, mode=mode, block_size=block_size, cache_options=cache_options, **kwargs)

    def get_file(self, rpath, lpath, callback=None, outfile=None, **kwargs):
        """Copies one file: a remote one through pagein.pull (parallel
        ranges, verified, renamed into place), a local one with shutil."""
        url = self._url(rpath)
        if outfile is not None:
            with self.open(url, "rb") as f:
                _shutil.copyfileobj(f, outfile, 8 << 20)
            return None
        if _os.path.isdir(lpath):
            lpath = _os.path.join(lpath, url.rstrip("/").rsplit("/", 1)[-1])
        if self.isdir(url):
            _os.makedirs(lpath, exist_ok=True)
            return None
        if _is_remote(url):
            _p.pull(url, lpath, sync=False)
        else:
            _shutil.copyfile(url, lpath)
        if callback is not None:
            size = _os.path.getsize(lpath)
            callback.set_size(size)
            callback.relative_update(size)
        return None

    def _rm(self, path):
        raise NotImplementedError("pagein.fsspec is read-only")

    def mkdir(self, path, create_parents=True, **kwargs):
        raise NotImplementedError("pagein.fsspec is read-only")


class PageinFile(AbstractBufferedFile):
    """A read-only fsspec file: fsspec's read-ahead cache, each missing
    block read by the range engine, cut into request_bytes requests that
    are in flight at once."""

    DEFAULT_BLOCK_SIZE = 8 << 20

    def __init__(self, fs, path, mode="rb", block_size=None, cache_type="readahead", cache_options=None, **kwargs):
        self._url = fs._url(path)
        self._src = fs._source(self._url)
        size = _pagein.source_info(self._src)[0]
        super().__init__(fs, self._url, mode=mode, block_size=block_size or "default", cache_type=cache_type,
                         cache_options=cache_options, size=size, **kwargs)

    def __repr__(self):
        # fsspec's repr shows the path, which here is the URL as given:
        # user:password@ and token query values are redacted
        return "<File-like object %s, %s>" % (type(self.fs).__name__, _redact(self.path))

    def _fetch_range(self, start, end):
        start, end = max(0, start), min(end, self.size)
        if end <= start:
            return b""
        step = max(1, self.fs.request_bytes)
        offs = list(range(start, end, step))
        lens = [min(step, end - o) for o in offs]
        parts = self.fs._read([self._src], [0] * len(offs), offs, lens)
        return parts[0] if len(parts) == 1 else b"".join(parts)


# ---- registration ---------------------------------------------------------

_saved = {}


def _subclass(proto):
    """PageinFileSystem registered under proto (override): paths without a
    scheme get proto's scheme back."""
    return type("Pagein%sFileSystem" % proto.capitalize(), (PageinFileSystem,),
                {"protocol": (proto,), "_default_scheme": _scheme(proto)})


def register(override=False, protocols=("http", "https", "s3", "s3a", "gs", "gcs", "hf")):
    """Registers the "pagein" protocol (done at import). With override=True
    also makes pagein serve `protocols` (fsspec.open("s3://..."),
    fsspec.filesystem("https"), pandas/pyarrow through fsspec), replacing
    s3fs, gcsfs, huggingface_hub and fsspec's HTTP for this process until
    unregister()."""
    _fsspec.register_implementation("pagein", PageinFileSystem, clobber=True)
    if not override:
        return
    from fsspec.registry import _registry
    for proto in protocols:
        if proto not in _saved:
            _saved[proto] = _registry.get(proto)
        _fsspec.register_implementation(proto, _subclass(proto), clobber=True)


def unregister():
    """Gives the protocols register(override=True) took back to their
    previous implementations."""
    from fsspec.registry import _registry
    for proto, cls in list(_saved.items()):
        if cls is None:
            _registry.pop(proto, None)
        else:
            _registry[proto] = cls
        del _saved[proto]


register()
