"""``fairshare whatif``: what would a policy change do to *my* teams on *my* workload?

Your queue configuration (imported by ``fairshare.importers``, or a scenario), your job
history (converted by ``fairshare.traces``), replayed by the simulator under the baseline
that behaves like your scheduler (``current``) and under the proposed policies and
settings, on the same jobs, task durations and seed; the report says who gains and who
loses, by how much (docs/whatif.md).

* ``variants``: what runs (policies, ``--vary`` settings);
* ``run``: the scenario assembled from config and history, one simulation per variant,
  the audit at the busiest instant;
* ``analysis``: the numbers (waits, share against entitlement, preemptions) and verdicts;
* ``report``: whatif.json, report.html, the terminal's lines; ``cli``: the command.
"""
