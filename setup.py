"""The compiled sorter core (``policies/machinery/_hdrf_kernel.pyx`` and
``_dff_kernel.pyx``, Cython) and the engine's freed-node fit test and placement index
walks (``engine/_fit_kernel.pyx``): everything else is in pyproject.toml.

The extensions are optional: where no C compiler or Python headers are present, setuptools
reports the failed build and installs the package without it, and the sorters run their
pure-Python methods (``machinery/compiled.py``). No fast-math and no fused multiply-add
(``-ffp-contract=off``; gcc fuses ``a * b + c`` by default on targets that have the
instruction, e.g. aarch64): the kernel must round every float as CPython does, so that its
decisions are the pure-Python sorter's.
"""

import sys

from setuptools import Extension, setup

FLOAT_FLAGS = [] if sys.platform == "win32" else ["-ffp-contract=off", "-fno-fast-math"]

setup(ext_modules=[
    Extension("fairshare.policies.machinery._hdrf_kernel",
              ["src/fairshare/policies/machinery/_hdrf_kernel.pyx"],
              extra_compile_args=FLOAT_FLAGS, optional=True),
    Extension("fairshare.policies.machinery._dff_kernel",
              ["src/fairshare/policies/machinery/_dff_kernel.pyx"],
              extra_compile_args=FLOAT_FLAGS, optional=True),
    Extension("fairshare.engine._fit_kernel", ["src/fairshare/engine/_fit_kernel.pyx"],
              extra_compile_args=FLOAT_FLAGS, optional=True),
])
