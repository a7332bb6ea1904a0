"""Discrete-event simulation on top of the pure ``engine.Scheduler`` (contract:
``fairshare simulate`` and ``fairshare compare``).

``simulator`` runs the clock (the event loop), ``events`` is the heap, ``arrivals`` says
where the jobs come from, ``durations`` samples task durations, ``recorder`` makes the
timeline's rows, ``preemption`` keeps the preemption books, ``sink`` (and ``stream``) take
a run's output, ``result`` holds its types, ``metrics`` turns a run into the summary
numbers (utilization, means, starvation, fairness gap), ``output`` writes
``summary.json`` and ``timeline.csv``, ``compare`` runs several policies on the same
scenario and seed. No policy logic lives
here: every decision is the ``Scheduler``'s (and so its policy's).
"""

from fairshare.sim.simulator import JobOutcome, SimOptions, SimResult, SimulationError, Simulator, simulate

__all__ = ["JobOutcome", "SimOptions", "SimResult", "SimulationError", "Simulator", "simulate"]
