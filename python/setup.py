"""Build hook of the posenc package (metadata: pyproject.toml).

Copies the shared library into the package when one is available at build time, so that
an installed posenc finds it next to itself: $POSENC_LIBRARY, else ../build/libposenc.so of
the source tree. Without it the package still installs and looks for the library in the
install prefix or through POSENC_LIBRARY at import time (posenc/_lib.py).
"""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))


def built_library():
    for path in (os.environ.get("POSENC_LIBRARY"), os.path.join(HERE, "..", "build", "libposenc.so")):
        if path and os.path.exists(path):
            return path
    return None


class BuildPy(build_py):
    def run(self):
        super().run()
        lib = built_library()
        if lib:
            dest = os.path.join(self.build_lib, "posenc", "libposenc.so")
            self.mkpath(os.path.dirname(dest))
            shutil.copyfile(lib, dest)
            os.chmod(dest, 0o755)


class BinaryDistribution(Distribution):
    """The wheel carries a native library: tag it for this platform."""

    def has_ext_modules(self):
        return built_library() is not None


cmdclass = {"build_py": BuildPy}
try:
    from wheel.bdist_wheel import bdist_wheel

    class Wheel(bdist_wheel):
        """The code is pure Python (the library is loaded with ctypes, no CPython ABI):
        py3-none-any, or py3-none-PLATFORM when it carries libposenc.so."""

        def get_tag(self):
            _, _, plat = super().get_tag()
            return "py3", "none", plat if built_library() else "any"

    cmdclass["bdist_wheel"] = Wheel
except ImportError:  # no wheel package: pip falls back to a plain install
    pass

setup(cmdclass=cmdclass, distclass=BinaryDistribution)
