"""The compiled sorter core, when it is built, and the pure-Python fallback otherwise.

``_hdrf_kernel.pyx`` is a Cython port of the H-DRF sorter's view maintenance
(``HDRFSorter._propagate``, ``_repost``, ``_recompute``: 30% of the CPU time of the
1,000-job, 1,000-node benchmark, docs/performance.md "A compiled kernel"; and ``_rebuild``,
a new view's build) and of the tree
sorters' candidate comparison and pick-heap renewal (``descent.pick_among_tree``,
``renew_pick_entries``, ``first_runnable_filed``, ``first_runnable_child`` and the descent
itself, ``descend_tree``: :func:`tree_pick_among`, :func:`tree_renew_pick_entries`,
:func:`tree_first_runnable`, :func:`tree_first_child`, :func:`tree_descend`). ``pip install``
compiles it where a C compiler and the Python headers are present (setup.py; an optional
extension, so a failed compile never fails the install); the pure-Python methods stay the
reference and are what runs where it is not built, with the same decisions (the port
repeats every float operation in the same order on the same typed arrays, a view's
state, ``hdrf_online._View``; ``tests/test_compiled_core.py`` holds the two equal
decision by decision and the views' floats event by event).

A sorter asks :func:`hdrf_replay` once, when it is built: setting the environment
variable ``FAIRSHARE_PURE_PYTHON=1`` forces the fallback for the sorters built after it
(the benchmarks and the parity tests run both ways in one process).
"""

from __future__ import annotations

import functools
import logging
import os
import pathlib
import shlex
import shutil
import sys
import sysconfig
from collections.abc import Callable, Iterable

try:
    from fairshare.policies.machinery import _hdrf_kernel
except ImportError as exc:  # not built: no compiler at install time, or a source tree run as is
    _hdrf_kernel = None
    # (built but not loadable, e.g. for another Python: say why)
    _built = [f for f in pathlib.Path(__file__).parent.glob("_hdrf_kernel.*") if f.suffix in (".so", ".pyd")]
    _MISSING = (f"not importable ({exc})" if _built else
                "not built (no C compiler or Python headers when fairshare was installed)")
else:
    _MISSING = ""

#: set to a non-empty value other than "0" to run the pure-Python sorters even where the
#: compiled core is built
PURE_PYTHON_ENV = "FAIRSHARE_PURE_PYTHON"

#: the pure-Python methods ``_hdrf_kernel.pyx`` ports, with the sha256 (first 16 hex digits)
#: of their source as ported: a change to one must be mirrored in the kernel, and then its
#: digest here updated (tests/test_compiled_core.py compares them, compiler or not).
#: ``HDRFSorter.*`` are in ``policies/hdrf_online.py``, ``descent.*`` in ``machinery/descent.py``
PORTED_FROM = {
    "HDRFSorter._propagate": "6c4e6741466446e5",
    "HDRFSorter._repost": "dd0ebc633118280b",
    "HDRFSorter._recompute": "c651b87e2b1b008a",
    "HDRFSorter._compact_pool": "70be770a09f5f8d0",
    "HDRFSorter._rebuild": "243cc5c4bb0ad4a0",
    "descent.pick_among_tree": "8bf57239bdf6a3d9",
    "descent.renew_pick_entries": "429e4a73d48cee39",
    "descent.first_runnable_by_key": "ab3252270eda6a94",
    "descent.first_runnable_child": "00c102f550e9e0f3",
    "descent.first_runnable_filed": "0935c490c1ee68d4",
    "descent.descend_tree": "26e4a3e4a9e785e6",
    "descent.shape_bits": "24048b84b1899158",
    "descent.queues_meeting": "4c57cdd85cf89f76",
}

log = logging.getLogger(__name__)
_announced = False


def forced_pure_python() -> bool:
    return os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0")


def available() -> bool:
    """Whether the compiled core is built and importable (whatever the environment says)."""
    return _hdrf_kernel is not None


def compiler_present() -> bool:
    """Whether ``pip install`` could build the core here: the C compiler setuptools would
    call (``$CC``, else the one Python was built with) and the Python headers. ``make
    test`` requires the core built where this holds (tests/test_compiled_core.py)."""
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    headers = os.path.join(sysconfig.get_paths()["include"], "Python.h")
    return bool(cc) and shutil.which(cc[0]) is not None and os.path.exists(headers)


def describe() -> str:
    """One line: which sorter core runs here, and why (``make test`` prints it)."""
    if forced_pure_python():
        return f"sorter core: pure-Python ({PURE_PYTHON_ENV} is set)"
    if _hdrf_kernel is None:
        return f"sorter core: pure-Python fallback, the compiled core is {_MISSING}"
    return f"sorter core: compiled ({_hdrf_kernel.__file__})"


def active() -> bool:
    """Whether a sorter built now uses the compiled core. Logs which one runs, once per
    process (at INFO: the library never prints)."""
    global _announced
    if not _announced:
        _announced = True
        log.info(describe())
    return _hdrf_kernel is not None and not forced_pure_python()


def hdrf_replay(sorter, rebuild_every: int) -> Callable[[object, Iterable[int]], None] | None:
    """The compiled ``HDRFSorter._propagate`` bound to ``sorter``, or None when the
    pure-Python method must run (not built, or forced)."""
    if not active():
        return None
    return functools.partial(_hdrf_kernel.propagate, sorter, rebuild_every=rebuild_every)


def hdrf_rebuild(sorter, rebuild_every: int) -> Callable[[object], None] | None:
    """The compiled ``HDRFSorter._rebuild`` bound to ``sorter``, or None when the
    pure-Python method must run."""
    if not active():
        return None
    return functools.partial(_hdrf_kernel.rebuild, sorter, rebuild_every=rebuild_every)


def _descent():
    """``machinery.descent`` (the reference walks), imported when a sorter first asks:
    this module also runs as a script before the package is installed (the Makefile's
    ``compiler`` step, ``python -P compiled.py``), where ``fairshare`` is not importable."""
    from fairshare.policies.machinery import descent

    return descent


def tree_pick_among() -> Callable[..., str | None]:
    """``descent.pick_among_tree`` for a sorter built now: the compiled one (the same
    signature and answer; it computes the keys from ``tables`` when given) or the
    reference."""
    if not active():
        return _descent().pick_among_tree
    return _hdrf_kernel.pick_among_tree


def tree_first_runnable() -> Callable[..., str | None]:
    """``descent.first_runnable_filed`` (a jobs-only queue's jobs of the live shapes by
    key) for a sorter built now: compiled (it computes the keys from ``tables`` when given)
    or the reference."""
    if not active():
        return _descent().first_runnable_filed
    return _hdrf_kernel.first_runnable_filed


def tree_first_child() -> Callable[..., str | None]:
    """``descent.first_runnable_child`` for a sorter built now: compiled (it computes the
    keys from ``tables`` when given) or the reference."""
    if not active():
        return _descent().first_runnable_child
    return _hdrf_kernel.first_runnable_child


def tree_descend() -> Callable[..., str | None]:
    """``descent.descend_tree`` (the descent from a node, H-DRF Alg. 4 / DFF Alg. 3) for a
    sorter built now: compiled (the same walk, the same ``runnable`` calls in the same
    order, without a Python frame per level) or the reference."""
    if not active():
        return _descent().descend_tree
    return _hdrf_kernel.descend_tree


def tree_shape_bits() -> Callable[[Iterable[int]], int]:
    """``descent.shape_bits`` (the mask of the shapes the engine names, ``only_shapes``)
    for a sorter built now: compiled or the reference."""
    if not active():
        return _descent().shape_bits
    return _hdrf_kernel.shape_bits


def tree_queues_meeting() -> Callable[[list[int], list[int], int], list[int]]:
    """``descent.queues_meeting`` (the queue children with a live shape,
    ``ShapeIndex.alive_queues_under``) for a sorter built now: compiled or the reference."""
    if not active():
        return _descent().queues_meeting
    return _hdrf_kernel.queues_meeting


def tree_renew_pick_entries() -> Callable[..., None]:
    """``descent.renew_pick_entries`` for a sorter built now: compiled or the reference."""
    if not active():
        return _descent().renew_pick_entries
    return _hdrf_kernel.renew_pick_entries


# --- DFF (``_dff_kernel.pyx``: ``DFFSorter._replay``, the view catch-up) ---------------------
try:
    from fairshare.policies.machinery import _dff_kernel
except ImportError:  # not built (as _hdrf_kernel above: the pure-Python method runs)
    _dff_kernel = None

#: the pure-Python methods ``_dff_kernel.pyx`` ports, digests as in :data:`PORTED_FROM`
#: (tests/test_dff_kernel.py compares them)
DFF_PORTED_FROM = {
    "DFFSorter._replay": "095479249fe32e75",
    "DFFSorter._leaf_blocked": "d8c36f8be4f7fd34",
    "DFFSorter._fairness": "25f8e91e5d896570",
    "DFFSorter._pool_min": "11142ec3467d6540",
    "DFFSorter._push": "650da338cc56552a",
    "dff_online._defer_pick": "d24e0f2d5bb2117b",
    "DFFSorter._compact_pool": "bf64b7bd4341364c",
    # a task's start or end (``task_changed``, ``leaf_changed``)
    "DFFSorter.allocated": "f1926df849398ae9",
    "DFFSorter.released": "084366f2bd42459f",
    "OnlineSorter.allocated": "55a94f71e0792237",
    "OnlineSorter.released": "12379423e2154887",
    "DFFSorter._leaf_changed": "ed49e5b618a63118",
    "DFFSorter._file_usage": "d358cea0825ac912",
    "DFFSorter._file_demanding": "07f0910e32e336d2",
    "DFFSorter._walk_counts": "2dd73164aaaf326f",
    "DFFSorter._add_usage": "1288f05aea61689b",
    "DFFSorter._touch": "0bdeeeaa9915135d",
    "DFFSorter._job_fr": "33ca5bcdd00a97a4",
    "dff.fairness": "e8ec929bf73f8195",
}


def dff_available() -> bool:
    """Whether the compiled DFF catch-up is built and importable."""
    return _dff_kernel is not None


def dff_replay(sorter) -> Callable[[object, Iterable[int]], None] | None:
    """The compiled ``DFFSorter._replay`` bound to ``sorter``, or None when the pure-Python
    method must run (not built, or forced)."""
    if _dff_kernel is None or forced_pure_python():
        return None
    return functools.partial(_dff_kernel.replay, sorter)



def dff_task_changed(sorter) -> Callable[[str, object, int, float], None] | None:
    """The compiled ``DFFSorter.allocated`` and ``released`` (a task's start or end, with
    ``_leaf_changed``), ``(name, demand, +1 or -1, now)``, bound to ``sorter``, or None
    when the pure-Python methods must run (not built, forced, or a fairness other than
    ``dff.fairness``, the one the port computes)."""
    # (the policy module by name: it imports this one; a sorter given its ``fairness`` has
    # loaded it)
    dff = sys.modules.get("fairshare.policies.dff")
    if _dff_kernel is None or forced_pure_python() or dff is None or sorter.raw_fairness is not dff.fairness:
        return None
    return functools.partial(_dff_kernel.task_changed, sorter)

if __name__ == "__main__":  # the Makefile's check before the first install: `python -P compiled.py`
    raise SystemExit(0 if compiler_present() else 1)
