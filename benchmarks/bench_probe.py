"""How long a node health probe (``live.ray_health``) waits for an answer while tasks
start on the node: the plain probe (the tasks' worker pool) against the probe in its own
runtime environment (``PROBE_RUNTIME_ENV``: a worker pool of its own), sent at the same
moment, right after ``--tasks`` tasks were submitted to the node. Repeated ``--rounds``
times, alternating which probe is submitted first; each round on a fresh local cluster
of two nodes of one Ray CPU (as serve's local nodes), so every round starts cold.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_probe.py --tasks 8 --rounds 3

Prints each round's two latencies and the load average.
"""

from __future__ import annotations

import argparse
import logging
import os
import time


def sleeper(seconds: float) -> str:
    time.sleep(seconds)
    return "done"


def one_round(tasks: int, plain_first: bool) -> tuple[float, float]:
    import ray
    from ray.cluster_utils import Cluster
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from fairshare.live.ray_health import PROBE_RUNTIME_ENV, _probe

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": 100 * 2 ** 20})
    node = cluster.add_node(num_cpus=1, resources={"slot": tasks}, object_store_memory=100 * 2 ** 20)
    ray.init(address=cluster.address, log_to_driver=False, logging_level=logging.WARNING)
    try:
        cluster.wait_for_nodes()
        pin = NodeAffinitySchedulingStrategy(node.node_id, soft=False)
        probe = ray.remote(num_cpus=0, max_retries=0)(_probe)
        # warm-up: one of each answered, as a running serve's probes would have been
        ray.get([probe.options(scheduling_strategy=pin).remote(),
                 probe.options(scheduling_strategy=pin, runtime_env=PROBE_RUNTIME_ENV).remote()], timeout=120)
        time.sleep(0.3)
        work = ray.remote(num_cpus=0, max_retries=0)(sleeper)
        busy = [work.options(scheduling_strategy=pin, resources={"slot": 1}).remote(20) for _ in range(tasks)]
        t0 = time.monotonic()
        kinds = [("plain", {}), ("own", {"runtime_env": PROBE_RUNTIME_ENV})]
        if not plain_first:
            kinds.reverse()
        refs = {name: probe.options(scheduling_strategy=pin, **extra).remote() for name, extra in kinds}
        seen: dict[str, float] = {}
        while len(seen) < len(refs) and time.monotonic() - t0 < 120:
            ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=0.01)
            for name, ref in refs.items():
                if ref in ready and name not in seen:
                    seen[name] = time.monotonic() - t0
        for ref in busy:
            ray.cancel(ref, force=True)
        return seen.get("plain", float("nan")), seen.get("own", float("nan"))
    finally:
        ray.shutdown()
        cluster.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=8, help="tasks submitted to the node before the probes")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for k in range(args.rounds):
        plain, own = one_round(args.tasks, plain_first=k % 2 == 0)
        print(f"round {k + 1}: plain probe {plain:.3f} s, own-environment probe {own:.3f} s "
              f"(load {os.getloadavg()[0]:.2f})", flush=True)


if __name__ == "__main__":
    main()
