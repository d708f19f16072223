"""The compiled novelty path (imprint_core/novelty/_fast/compiled.pyx), built by
`pip install` from the Cython that pyproject.toml's build-system requires.
Optional: where it does not compile, the package installs without it and
the pure-Python path runs (imprint_core/novelty/_fast/accel.py says so once)."""
from setuptools import Extension, setup

try:
    from Cython.Build import cythonize
    extensions = cythonize([Extension("imprint_core.novelty._fast.compiled", ["imprint_core/novelty/_fast/compiled.pyx"],
                                      extra_compile_args=["-O3"])], quiet=True)
except Exception as exc:  # no Cython, or the .pyx does not translate: install without it
    print(f"note: the compiled novelty path is not built ({exc})")
    extensions = []
for ext in extensions:
    ext.optional = True   # a compiler error skips the extension instead of failing the install

setup(ext_modules=extensions)
