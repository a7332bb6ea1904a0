# cython: language_level=3, boundscheck=False, wraparound=False
"""The freed node's fit test, compiled: ``FitMemo``'s scan of a freed node and its
re-check after a launch (``engine/fitmemo.py``) in one call.

:func:`restrict` is ``fitmemo.restrict_reference`` (the pure-NumPy form, the reference and
the fallback where this is not built or ``FAIRSHARE_PURE_PYTHON`` is set): the columns ``c``
of ``needs`` with no row ``r`` where ``needs[r, c] > limits[r]``, which is NumPy's
``~logical_or.reduce(needs > limits[:, None], axis=0)`` on the same doubles (a C ``>``
on doubles is IEEE's, as NumPy's: false when either side is NaN), with the keys, need
columns and numbers of those columns, in column order. No arithmetic, only comparisons:
nothing is rounded. At 1,000 jobs the NumPy form is eleven array operations per call,
each mostly call overhead (~1 us); this is one call (``tests/test_predicates.py``
compares the two).
"""

import numpy as np

from libc.stdlib cimport free, malloc


def restrict(list keys, const double[:, :] needs, const Py_ssize_t[:] numbers, tuple limits, whole):
    """``(keys, needs, numbers)`` restricted to the columns whose need fits under
    ``limits``; ``whole`` (when not None) is returned as is when every column fits."""
    cdef Py_ssize_t m = needs.shape[0], n = needs.shape[1], r, c, k = 0
    if len(limits) != m:  # (NumPy's broadcast would refuse it: say so the same way)
        raise ValueError(f"{len(limits)} limits for {m} rows of needs")
    cdef double *lim = <double *> malloc((m + 1) * sizeof(double))
    cdef Py_ssize_t *fit = <Py_ssize_t *> malloc((n + 1) * sizeof(Py_ssize_t))
    if lim == NULL or fit == NULL:
        free(lim)
        free(fit)
        raise MemoryError()
    cdef double[:, ::1] out_needs
    cdef Py_ssize_t[::1] out_numbers
    try:
        for r in range(m):
            lim[r] = <double> limits[r]
        for c in range(n):
            for r in range(m):
                if needs[r, c] > lim[r]:
                    break
            else:
                fit[k] = c
                k += 1
        if k == n and whole is not None:
            return whole
        out = np.empty((m, k), dtype=float)
        got = np.empty(k, dtype=np.intp)
        out_needs = out
        out_numbers = got
        fitting = [keys[fit[c]] for c in range(k)]
        for c in range(k):
            out_numbers[c] = numbers[fit[c]]
            for r in range(m):
                out_needs[r, c] = needs[r, fit[c]]
        return fitting, out, got
    finally:
        free(lim)
        free(fit)
