"""pip install ./python - builds the pagein package from this repository.

libpagein.a is built first with the repository's own Makefile (so the
library's optional parts and their link flags are whatever `make` would
use), in a folder under this build's temporary directory, and linked
statically into the _pagein extension. Needs make, a C compiler and the
Python headers (Debian: python3-dev). Set PAGEIN_REPO to build against a
checkout elsewhere.
"""
import os
import shlex
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.environ.get("PAGEIN_REPO") or os.path.join(HERE, ".."))


def version():
    with open(os.path.join(REPO, "include", "pagein.h")) as fh:
        for line in fh:
            if line.startswith("#define PAGEIN_VERSION_STRING"):
                return line.split('"')[1]
    return "0"


class BuildWithLibrary(build_ext):
    def run(self):
        build = os.path.abspath(os.path.join(self.build_temp, "libpagein"))
        make = os.environ.get("MAKE", "make")
        cmd = [make, "-C", REPO, "BUILD=" + build, "PY=" + sys.executable, build + "/libpagein.a"]
        subprocess.check_call(cmd)
        def ask(goal):
            return subprocess.check_output([make, "-s", "-C", REPO, "BUILD=" + build, goal], text=True).split()
        ldlibs = ask("print-lib-ldlibs")
        # The extension's units and defines, as mk/python.mk builds them
        # (the GPU unit comes with the GPU part: mk/gpu.mk).
        srcs = [os.path.join("src", os.path.basename(s)) for s in ask("print-py-srcs")]
        defs = [d[2:].partition("=") for d in ask("print-py-defs") if d.startswith("-D")]
        for ext in self.extensions:
            ext.sources = srcs
            ext.define_macros = ext.define_macros + [(k, v or None) for k, _, v in defs]
            ext.extra_objects = [os.path.join(build, "libpagein.a")]
            ext.libraries = [f[2:] for f in ldlibs if f.startswith("-l")]
            ext.library_dirs = [f[2:] for f in ldlibs if f.startswith("-L")]
            ext.extra_link_args = ["-Wl,--exclude-libs,ALL"] + [f for f in ldlibs if not f.startswith(("-l", "-L"))]
        super().run()


setup(
    name="pagein",
    version=version(),
    description="Load model weights from safetensors and GGUF fast and safely (zero-copy numpy/torch)",
    packages=["pagein"],
    ext_modules=[Extension(
        "pagein._pagein",
        sources=["src/module.c"],  # the whole list comes from make (BuildWithLibrary)
        include_dirs=[os.path.join(REPO, "include")],
        # PAGEIN_EXPERIMENTAL: the module uses the header's experimental
        # section, as every make build does (mk/api.mk)
        define_macros=[("_GNU_SOURCE", None), ("PAGEIN_EXPERIMENTAL", None)],
        extra_compile_args=shlex.split(os.environ.get("PAGEIN_CFLAGS", "-std=c11 -O2")),
    )],
    cmdclass={"build_ext": BuildWithLibrary},
    python_requires=">=3.8",
    install_requires=["numpy"],
    extras_require={"torch": ["torch"]},
)
