"""The machinery the policies share, none of it any one paper's formula.

* ``ties.py``: the written tie rule (``DIGITS``, ``tie_key``), once for every decision.
* ``tree.py``: the fill trees a policy builds from a scenario (flat or hierarchical).
* ``filling.py``: exact event-driven hierarchical progressive filling (static).
* ``progressive.py``: ``FillingPolicy``: tree + level rule -> divisible fill / whole-task greedy.
* ``reference_fill.py``: the literal epsilon-step Alg. 1, for tests and benchmarks.
* ``reference.py``: ``ReferenceSorter`` and ``ShareRule``: the per-decision online reference,
  parameterized by each policy's rule.
* ``descent.py``: the tree sorters' heap walk, descent, candidates' shortcut, exclusion.
* ``views.py``: one incremental view per recently seen saturated set (H-DRF, DFF sorters).
* ``compiled.py``: the compiled sorter core (``_hdrf_kernel.pyx``, Cython) when built, else the
  pure-Python methods it ports (the reference, and the fallback without a C compiler).
* ``flat.py``: the flat sorters (one heap over the jobs; FIFO's arrival-order scan).

The seam is ``policies/base.py`` (``Policy``) and ``policies/online.py`` (``OnlineSorter``);
each paper's policy is one module of ``policies/``.
"""
