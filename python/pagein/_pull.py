"""pagein.pull: parallel, resumable, verified downloads (docs/REMOTE.md)."""

import os as _os

from . import _pagein
from ._pagein import FormatError


# ---- remote pull (docs/REMOTE.md) ------------------------------------------
def pull(src, dest=None, *, connections=0, chunk=0, stage=None, cache_dir=None, sync=True):
    """Downloads a remote model or shards (http(s)://, s3://, gs://,
    hf://ORG/NAME[@REV][/PATH], a prefix ending in '/', or a *.index.json
    with its shards) in parallel range requests, resumable, verified and
    renamed into place (docs/REMOTE.md; `pagein pull`).

    dest: a file or directory; None puts hf:// into the Hugging Face cache
    (cache_dir, else HF_HUB_CACHE / HF_HOME/hub / ~/.cache/huggingface/hub)
    and other sources into the current directory. stage: a directory for
    training shards (relative paths kept). Returns a dict: path, files,
    bytes, fetched, resumed, cached, requests, retries, seconds, verified.
    Raises pagein.Error (FormatError for HTTP, verification and change
    errors, FileError for local I/O). Runs without the GIL."""
    if not _pagein.remote_available():
        raise FormatError("pagein was built without libcurl: no remote sources")
    return _pagein.pull(_os.fspath(src) if not isinstance(src, str) else src,
                        None if dest is None else _os.fsdecode(_os.fspath(dest)),
                        connections=connections, chunk=chunk,
                        stage=None if stage is None else _os.fsdecode(_os.fspath(stage)),
                        cache_dir=None if cache_dir is None else _os.fsdecode(_os.fspath(cache_dir)),
                        sync=bool(sync))
