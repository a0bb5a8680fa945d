"""The installed package: it carries libdtrain.so.0 beside its extension and loads that
copy (RPATH $ORIGIN), with no environment variable; it ships its type hints."""
import os
import pathlib
import subprocess
import sys

import dtrain


def test_libdtrain_comes_from_the_package_without_environment():
    package = pathlib.Path(dtrain.__file__).parent
    assert (package / "libdtrain.so.0").is_file() and (package / "py.typed").is_file()
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "PKG_CONFIG_PATH")}
    probe = ("import dtrain, os\n"
             "maps = open('/proc/self/maps').read().split()\n"
             "print(sorted({os.path.realpath(p) for p in maps if 'libdtrain' in p}))")
    out = subprocess.run([sys.executable, "-c", probe], env=env, cwd=str(package.parent.parent),
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == str([os.path.realpath(package / "libdtrain.so.0")])


def test_version_and_the_public_names():
    assert dtrain.__version__.count(".") == 2
    for name in ("CancelToken", "CancelledError", "from_dlpack", "from_numpy", "Tensor", "Engine", "Loader"):
        assert hasattr(dtrain, name), name
    assert issubclass(dtrain.CancelledError, dtrain.DtrainError)
    assert dtrain.status_name(11) == "DT_ERR_CANCELLED"
