"""Builds dtrain.native (SWIG over bindings/swig/dtrain.i) against an installed libdtrain.

The library is found through pkg-config (set PKG_CONFIG_PATH to <prefix>/lib/pkgconfig),
or DTRAIN_PREFIX=<prefix>. The extension records the library's directory as its rpath,
so the installed package imports without LD_LIBRARY_PATH.
"""
import os
import shlex
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
INTERFACE = os.path.join(HERE, "..", "swig", "dtrain.i")


def find_dtrain():
    """(include dirs, library dirs) of libdtrain."""
    prefix = os.environ.get("DTRAIN_PREFIX")
    if prefix:
        return [os.path.join(prefix, "include")], [os.path.join(prefix, "lib")]
    try:
        cflags = subprocess.check_output(["pkg-config", "--cflags-only-I", "dtrain"], text=True)
        libs = subprocess.check_output(["pkg-config", "--libs-only-L", "dtrain"], text=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit("dtrain: libdtrain not found: set PKG_CONFIG_PATH to <prefix>/lib/pkgconfig "
                         "or DTRAIN_PREFIX to its install prefix (%s)" % e)
    return ([f[2:] for f in shlex.split(cflags) if f.startswith("-I")],
            [f[2:] for f in shlex.split(libs) if f.startswith("-L")])


class BuildWithSwig(build_ext):
    """Runs swig first: the raw module dtrain/native.py goes with the package."""

    def run(self):
        includes, _ = find_dtrain()
        os.makedirs(self.build_temp, exist_ok=True)
        package_dir = os.path.join(self.build_lib, "dtrain")
        os.makedirs(package_dir, exist_ok=True)
        wrapper = os.path.join(self.build_temp, "dtrain_wrap.c")
        cmd = ["swig", "-python", "-outdir", package_dir, "-o", wrapper]
        cmd += ["-I" + d for d in includes] + [INTERFACE]
        subprocess.check_call(cmd)
        for ext in self.extensions:
            ext.sources = [wrapper]
        super().run()
        if self.inplace:  # `setup.py build_ext --inplace`: the module beside the sources
            self.copy_file(os.path.join(package_dir, "native.py"), os.path.join(HERE, "dtrain"))


includes, libdirs = find_dtrain()
setup(
    ext_modules=[Extension("dtrain._native", sources=[], include_dirs=includes, library_dirs=libdirs,
                           runtime_library_dirs=libdirs, libraries=["dtrain"])],
    cmdclass={"build_ext": BuildWithSwig},
)
