# cython: language_level=3, boundscheck=False, wraparound=False
"""The freed node's fit test, compiled: ``FitMemo``'s scan of a freed node and its
re-check after a launch (``engine/fitmemo.py``) in one call; the placement index's
climb and first-fit walk (``engine/placement.py``, below); a task's start and end on
its node with the node's new row (``free_row``, ``taken``, ``given_back``); and, on a node
without devices or slots, the whole of a launch's and a task end's pool work in one call
(``take_plain``, ``give_back_plain``); and the one freed node's candidate jobs
(``candidate_jobs``, at the end).

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

from cpython.buffer cimport (PyBUF_FORMAT, PyBUF_STRIDES, PyBUF_WRITABLE, PyBuffer_Release,
                             PyObject_GetBuffer)
from libc.stdlib cimport free, malloc

# ``restrict`` reads and writes its arrays through the buffer protocol, not Cython's typed
# memoryviews: a memoryview slice is a Python object made and checked per argument, and
# at four arrays a call their making, with the outputs' ``np.empty``, was 6.5-7% of hdrf's
# steady state at 1k and at 10k jobs (py-spy; docs/performance.md, issue 24 round 13).
# The same doubles are read, by their strides, whatever the layout.
_empty = np.empty
_DOUBLE = np.dtype(float)
_INDEX = np.dtype(np.intp)
cdef const char *_UNSIGNED_BYTE = b"B"


cdef int take_buffer(object array, Py_buffer *view, int ndim, char kind, bint writable) except -1:
    """``array``'s buffer with strides and format, checked to be ``ndim``-dimensional items
    of ``kind`` (``d``: doubles; ``n``: ``Py_ssize_t``-sized integers, NumPy's intp), as
    the typed memoryviews this replaced refused anything else (``ValueError``)."""
    cdef int flags = PyBUF_STRIDES | PyBUF_FORMAT
    if writable:
        flags |= PyBUF_WRITABLE
    PyObject_GetBuffer(array, view, flags)
    cdef const char *fmt = view.format
    if fmt == NULL:
        fmt = _UNSIGNED_BYTE  # (the protocol's default when no format is given)
    while fmt[0] == b"<" or fmt[0] == b"=" or fmt[0] == b"@":  # (native order and size)
        fmt += 1
    cdef bint ok = view.ndim == ndim and fmt[0] != 0 and fmt[1] == 0
    if ok and kind == b"d":
        ok = view.itemsize == sizeof(double) and fmt[0] == b"d"
    elif ok:
        ok = view.itemsize == sizeof(Py_ssize_t) and (fmt[0] == b"n" or fmt[0] == b"l" or fmt[0] == b"q")
    if not ok:
        got = (view.format if view.format != NULL else b"B").decode("ascii", "replace")
        got_ndim = view.ndim
        PyBuffer_Release(view)
        raise ValueError(f"Buffer dtype mismatch or wrong number of dimensions: expected {ndim}-dimensional "
                         f"{'float64' if kind == b'd' else 'intp'}, got {got_ndim}-dimensional {got!r}")
    return 0


cdef int take_pair(object first, Py_buffer *first_view, int first_ndim, object second, Py_buffer *second_view,
                   bint writable) except -1:
    """``first``'s buffer (doubles in ``first_ndim`` dimensions) and ``second``'s (a vector
    of intp), ``take_buffer``'s checks on each: both held, or neither."""
    take_buffer(first, first_view, first_ndim, b"d", writable)
    try:
        take_buffer(second, second_view, 1, b"n", writable)
    except BaseException:
        PyBuffer_Release(first_view)
        raise
    return 0


def restrict(list keys, needs, numbers, tuple limits, whole):
    """``(keys, needs, numbers)`` restricted to the columns whose need fits under
    ``limits``; ``whole`` (when not None) is returned as is when every column fits."""
    cdef Py_buffer need_buf, number_buf, out_buf, got_buf
    cdef Py_ssize_t m, n, r, c, k = 0, s0, s1, sn
    cdef char *need_at
    cdef char *number_at
    cdef double *lim = NULL
    cdef Py_ssize_t *fit = NULL
    cdef double *out_at
    cdef Py_ssize_t *got_at
    take_pair(needs, &need_buf, 2, numbers, &number_buf, False)
    try:
        m, n = need_buf.shape[0], need_buf.shape[1]
        s0, s1 = need_buf.strides[0], need_buf.strides[1]
        need_at, number_at, sn = <char *>need_buf.buf, <char *>number_buf.buf, number_buf.strides[0]
        if len(limits) != m:  # (NumPy's broadcast would refuse it: say so the same way)
            raise ValueError(f"{len(limits)} limits for {m} rows of needs")
        lim = <double *> malloc((m + 1) * sizeof(double))
        fit = <Py_ssize_t *> malloc((n + 1) * sizeof(Py_ssize_t))
        if lim == NULL or fit == NULL:
            raise MemoryError()
        for r in range(m):
            lim[r] = <double> limits[r]
        for c in range(n):
            for r in range(m):
                if (<double *>(need_at + r * s0 + c * s1))[0] > lim[r]:
                    break
            else:
                fit[k] = c
                k += 1
        if k == n and whole is not None:
            return whole
        if k and fit[k - 1] >= number_buf.shape[0]:  # (a kept column without its number: as NumPy's take)
            raise IndexError(f"column {fit[k - 1]} kept, {number_buf.shape[0]} numbers")
        fitting = [keys[fit[c]] for c in range(k)]
        out = _empty((m, k), _DOUBLE)
        got = _empty(k, _INDEX)
        take_pair(out, &out_buf, 2, got, &got_buf, True)
        try:
            out_at, got_at = <double *>out_buf.buf, <Py_ssize_t *>got_buf.buf  # (C order, fresh)
            for c in range(k):
                got_at[c] = (<Py_ssize_t *>(number_at + fit[c] * sn))[0]
                for r in range(m):
                    out_at[r * k + c] = (<double *>(need_at + r * s0 + fit[c] * s1))[0]
        finally:
            PyBuffer_Release(&out_buf)
            PyBuffer_Release(&got_buf)
        return fitting, out, got
    finally:
        free(lim)
        free(fit)
        PyBuffer_Release(&need_buf)
        PyBuffer_Release(&number_buf)


# --- the placement index's walks (engine/placement.py, ``_MaxTree``) ---------------------
# ``pull_levels`` and ``first_fit`` are ``placement.pull_levels_reference`` and
# ``placement.first_fit_reference`` on the same rows: Python lists and tuples of numbers,
# read in place. Every comparison is CPython's: two exact floats are compared as their
# doubles (CPython's own float comparison is that C comparison, NaN included), anything
# else through ``PyObject_RichCompareBool``; a row equality is a list's (same length, each
# pair the same object or equal). Rows are the objects the reference would build: the
# children's own numbers, chosen by the same tests. Nothing is computed, nothing rounded.

from cpython.object cimport Py_EQ, Py_GT, PyObject, PyObject_RichCompareBool

cdef extern from "Python.h":
    Py_ssize_t PySequence_Fast_GET_SIZE(object o)
    PyObject *PySequence_Fast_GET_ITEM(object o, Py_ssize_t i)
    bint PyFloat_CheckExact(PyObject *o)
    double PyFloat_AS_DOUBLE(PyObject *o)


cdef inline bint _greater(PyObject *a, PyObject *b) except -1:
    """``a > b`` as CPython evaluates it."""
    if PyFloat_CheckExact(a) and PyFloat_CheckExact(b):
        return PyFloat_AS_DOUBLE(a) > PyFloat_AS_DOUBLE(b)
    return PyObject_RichCompareBool(<object> a, <object> b, Py_GT)


cdef inline object _row(object row):
    """A row as a list or tuple (read in place; anything else: its tuple)."""
    if type(row) is list or type(row) is tuple:
        return row
    return tuple(row)


cdef inline bint _any_greater(object need, object row) except -1:
    """``any(map(gt, need, row))``: stops at the shorter and at the first true."""
    cdef Py_ssize_t i, n = PySequence_Fast_GET_SIZE(need)
    if PySequence_Fast_GET_SIZE(row) < n:
        n = PySequence_Fast_GET_SIZE(row)
    for i in range(n):
        if _greater(PySequence_Fast_GET_ITEM(need, i), PySequence_Fast_GET_ITEM(row, i)):
            return True
    return False


cdef inline bint _rows_equal(list new, object old) except -1:
    """``new == old`` for a list ``new`` (a list equals only a list: same length, each pair
    the same object or equal)."""
    cdef Py_ssize_t i, n = len(new)
    cdef PyObject *a
    cdef PyObject *b
    if type(old) is not list or len(<list> old) != n:
        return False
    for i in range(n):
        a = PySequence_Fast_GET_ITEM(new, i)
        b = PySequence_Fast_GET_ITEM(old, i)
        if a == b:
            continue
        if PyFloat_CheckExact(a) and PyFloat_CheckExact(b):
            if not (PyFloat_AS_DOUBLE(a) == PyFloat_AS_DOUBLE(b)):
                return False
        elif not PyObject_RichCompareBool(<object> a, <object> b, Py_EQ):
            return False
    return True


def pull_levels(list tree, list limit, set level):
    """``placement.pull_levels_reference``, compiled."""
    cdef Py_ssize_t k, i, n
    cdef list new, new_limit
    cdef set above
    cdef PyObject *x
    cdef PyObject *y
    while level:
        above = set()
        for k in level:
            a = _row(tree[2 * k])
            b = _row(tree[2 * k + 1])
            n = PySequence_Fast_GET_SIZE(a)
            if PySequence_Fast_GET_SIZE(b) < n:
                n = PySequence_Fast_GET_SIZE(b)
            new = [None] * n
            for i in range(n):
                x = PySequence_Fast_GET_ITEM(a, i)
                y = PySequence_Fast_GET_ITEM(b, i)
                new[i] = <object> x if _greater(x, y) else <object> y
            if _rows_equal(new, tree[k]):
                continue
            tree[k] = new
            s = _row(limit[2 * k])
            t = _row(limit[2 * k + 1])
            if PySequence_Fast_GET_SIZE(s) < n:
                n = PySequence_Fast_GET_SIZE(s)
            if PySequence_Fast_GET_SIZE(t) < n:
                n = PySequence_Fast_GET_SIZE(t)
            new_limit = [None] * n
            for i in range(n):
                if _greater(PySequence_Fast_GET_ITEM(a, i), PySequence_Fast_GET_ITEM(b, i)):
                    new_limit[i] = <object> PySequence_Fast_GET_ITEM(s, i)
                else:
                    new_limit[i] = <object> PySequence_Fast_GET_ITEM(t, i)
            limit[k] = new_limit
            if k > 1:
                above.add(k >> 1)
        level = above


def first_fit(list limit, Py_ssize_t size, Py_ssize_t n, need, Py_ssize_t start):
    """``placement.first_fit_reference``, compiled."""
    cdef Py_ssize_t k, p
    need = _row(need)
    if not 0 <= start < n:  # (no position there)
        return -1
    if start == 0:
        if _any_greater(need, _row(limit[1])):
            return -1
        k = 1
    else:
        k = size + start
        while _any_greater(need, _row(limit[k])):
            while k & 1:
                k >>= 1
                if k == 1:
                    return -1
            k += 1
    while True:
        if k >= size:
            p = k - size
            return p if p < n else -1
        k <<= 1
        if not _any_greater(need, _row(limit[k])):
            continue
        k += 1
        if not _any_greater(need, _row(limit[k])):
            continue
        while True:
            while k & 1:
                k >>= 1
                if k == 1:
                    return -1
            k += 1
            if not _any_greater(need, _row(limit[k])):
                break


# --- a node's row (engine/placement.py, ``NodePool._fit_row``) ----------------------------
# ``free_row`` is ``placement.free_row_reference``: the free vector as a tuple and, per
# entry, ``model.resources.fit_limit`` of it. For an exact float ``b`` that is
# ``b + FIT_TOLERANCE * (b if b > 1.0 else (-b if b < -1.0 else 1.0))``, which CPython
# evaluates as these C double operations, one at a time (each rounded; setup.py builds with
# ``-ffp-contract=off``: no fused multiply-add), so the same float; anything else (an int,
# a float subclass) goes through ``fit_limit`` itself.

from fairshare.model.resources import FIT_TOLERANCE, fit_limit

cdef double _TOLERANCE = FIT_TOLERANCE


def free_row(free):
    """``placement.free_row_reference``, compiled."""
    cdef tuple vec = tuple(free)
    cdef Py_ssize_t i, n = len(vec)
    cdef list limits = [None] * n
    cdef double b
    cdef PyObject *x
    for i in range(n):
        x = PySequence_Fast_GET_ITEM(vec, i)
        if PyFloat_CheckExact(x):
            b = PyFloat_AS_DOUBLE(x)
            limits[i] = b + _TOLERANCE * (b if b > 1.0 else (-b if b < -1.0 else 1.0))
        else:
            limits[i] = fit_limit(<object> x)
    return vec, tuple(limits)


# --- a task's start and end on its node (engine/placement.py, ``NodePool.take`` and
# ``give_back``) ---------------------------------------------------------------------------
# ``taken`` and ``given_back`` are ``placement.taken_reference`` and
# ``placement.given_back_reference``: per resource one subtraction (one addition, one
# comparison with the capacity, the capacity object itself kept when it is not above the
# sum), and the pool's total moved in place, each a C double operation on exact floats
# (CPython's own float arithmetic); where any entry is not an exact float, the reference
# runs instead. Same lengths only (the pool's m entries everywhere): else the reference,
# whose ``zip`` stops at the shortest.

cdef inline bint _all_floats(object row, Py_ssize_t n) except -1:
    cdef Py_ssize_t i
    if PySequence_Fast_GET_SIZE(row) != n:
        return False
    for i in range(n):
        if not PyFloat_CheckExact(PySequence_Fast_GET_ITEM(row, i)):
            return False
    return True


def taken(list free, demand, list total):
    """``placement.taken_reference``, compiled."""
    cdef Py_ssize_t i, n = len(free)
    demand = _row(demand)
    if not (_all_floats(free, n) and _all_floats(demand, n) and _all_floats(total, n)):
        from fairshare.engine.placement import taken_reference
        return taken_reference(free, demand, total)
    cdef list out = [None] * n
    cdef double d
    for i in range(n):
        d = PyFloat_AS_DOUBLE(PySequence_Fast_GET_ITEM(demand, i))
        out[i] = PyFloat_AS_DOUBLE(PySequence_Fast_GET_ITEM(free, i)) - d
        total[i] = PyFloat_AS_DOUBLE(PySequence_Fast_GET_ITEM(total, i)) - d
    return out


def given_back(list free, demand, capacity, list total):
    """``placement.given_back_reference``, compiled."""
    cdef Py_ssize_t i, n = len(free)
    cdef double f, x
    cdef PyObject *cap
    demand = _row(demand)
    capacity = _row(capacity)
    if not (_all_floats(free, n) and _all_floats(demand, n) and _all_floats(capacity, n)
            and _all_floats(total, n)):
        from fairshare.engine.placement import given_back_reference
        return given_back_reference(free, demand, capacity, total)
    cdef list out = [None] * n
    for i in range(n):
        f = PyFloat_AS_DOUBLE(PySequence_Fast_GET_ITEM(free, i))
        x = f + PyFloat_AS_DOUBLE(PySequence_Fast_GET_ITEM(demand, i))
        cap = PySequence_Fast_GET_ITEM(capacity, i)
        if x < PyFloat_AS_DOUBLE(cap):
            out[i] = x
        else:
            out[i] = <object> cap
            x = PyFloat_AS_DOUBLE(cap)
        total[i] = PyFloat_AS_DOUBLE(PySequence_Fast_GET_ITEM(total, i)) + (x - f)
    return out


# --- a task's start and end on a plain node (engine/placement.py, ``take_plain_reference``
# and ``give_back_plain_reference``) --------------------------------------------------------
# The same steps on the same objects, in one call per launch and per task end: ``taken`` /
# ``given_back`` and ``free_row`` above (the compiled forms ``placement`` uses where this is
# built), the pool's attributes read and set as the reference reads and sets them (generic
# attribute access, CPython's own); ``_freed_node`` called where the reference calls it.
# No arithmetic of its own: nothing is computed that the reference does not compute.

cimport cython

cdef Py_ssize_t _LOG_MAX = -1  # placement._FREED_LOG, read at the first task end (placement
                                # imports this module: not at import time)


@cython.boundscheck(True)
@cython.wraparound(True)  # (indexes as the reference's: checked, negative from the end)
def take_plain(pool, Py_ssize_t idx, demand):
    """``placement.take_plain_reference``, compiled."""
    st = pool.states[idx]
    free = taken(st.free, demand, pool.total_free)
    st.free = free
    st.tasks += 1
    pool._rows[idx] = free_row(free) if st.alive else None
    if pool._limits_np is not None:
        pool._np_stale.add(idx)
    for tree, k in pool._member_of.get(idx, ()):
        tree.dirty.add(k)
    return ()


@cython.boundscheck(True)
@cython.wraparound(True)
def give_back_plain(pool, Py_ssize_t idx, demand):
    """``placement.give_back_plain_reference``, compiled."""
    global _LOG_MAX
    if _LOG_MAX < 0:
        from fairshare.engine.placement import _FREED_LOG
        _LOG_MAX = _FREED_LOG
    st = pool.states[idx]
    if not st.alive:
        return
    free = given_back(st.free, demand, st.node.capacity, pool.total_free)
    st.free = free
    st.tasks -= 1
    pool._rows[idx] = free_row(free)
    if pool._limits_np is not None:
        pool._np_stale.add(idx)
    for tree, k in pool._member_of.get(idx, ()):
        tree.dirty.add(k)
    last = pool._last_freed
    freed = pool._freed
    if idx >= len(last) or len(freed) >= _LOG_MAX:
        pool._freed_node(idx)
    else:
        last[idx] = pool._freed_base + len(freed)
        freed.append(idx)


# --- the one freed node's candidate jobs (engine/fitmemo.py, ``candidate_jobs_reference``) ---
# The same list from the same dicts: the groups of the numbers >= 0 found in
# ``groups_by_number`` and not empty, in the order of ``numbers``, each group's keys in its
# own order; None by the reference's test on the same count (``n * n * among_cost`` as
# Python computes it: the int ``n * n`` converted to a double, exactly below 2**53, times the
# double). The count only grows, so once it passes ``among_max`` the answer is None whatever
# the other groups hold: the loop stops there and builds no list (at 10,000 jobs more than
# half of the freed node's lists are too long, about 640 jobs in about 25 shapes).

def candidate_jobs(numbers, dict groups_by_number, Py_ssize_t among_max, double among_cost, Py_ssize_t filed):
    """``fitmemo.candidate_jobs_reference``, compiled (``numbers`` read through its buffer,
    as ``restrict`` reads its arrays)."""
    cdef Py_buffer number_buf
    cdef Py_ssize_t i, k, n = 0, number, sn
    cdef char *number_at
    cdef list groups = []
    cdef list out
    cdef object group
    take_buffer(numbers, &number_buf, 1, b"n", False)
    try:
        k, sn, number_at = number_buf.shape[0], number_buf.strides[0], <char *>number_buf.buf
        for i in range(k):
            number = (<Py_ssize_t *>(number_at + i * sn))[0]
            if number < 0:
                continue  # (-1: no job; never a key of groups_by_number)
            group = groups_by_number.get(number)
            if not group:
                continue
            n += len(<dict> group)
            if n > among_max:
                return None
            groups.append(group)
    finally:
        PyBuffer_Release(&number_buf)
    if n > among_max or <double> (n * n) * among_cost > <double> filed:  # (no group: n = 0, maybe above)
        return None
    out = []
    for group in groups:
        out.extend(<dict> group)
    return out
