"""A tenant's Ray program for tests/test_live_ray_programs.py: it tries to take twice its
admitted share, 2 actors and 2 tasks of one fairshare CPU each against a placement group
of 2 bundles, and notes every start and end (with the placement group Ray ran it in)
in the file LOG: ``<job> <what> <placement group id> <time>``.

usage: python ray_program.py LOG HOLD_S
"""

import os
import signal
import sys
import time

import ray

LOG, HOLD_S = sys.argv[1], float(sys.argv[2])
JOB = os.environ["FAIRSHARE_JOB_ID"]
ONE_CPU = {"num_cpus": 0, "resources": {"fs_cpu": 1}}  # (fairshare.ray.options(cpu=1) on a local cluster)


def note(job, what):
    with open(LOG, "a") as f:
        f.write(f"{job} {what} {ray.get_runtime_context().get_placement_group_id()} {time.time()}\n")


@ray.remote(**ONE_CPU)
def task(job, hold_s):
    note(job, "task-start")
    time.sleep(hold_s)
    note(job, "task-end")


@ray.remote(**ONE_CPU)
class Holder:
    def __init__(self, job):
        self.job = job
        note(job, "actor-start")

    def hold(self, hold_s):
        time.sleep(hold_s)
        note(self.job, "actor-end")


def on_sigterm(signum, frame):
    note(JOB, "sigterm")  # (a real program would checkpoint here)
    print("driver: SIGTERM, stopping", flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, on_sigterm)
ray.init()
note(JOB, "driver-start")
print(f"driver of job {JOB} in placement group {ray.get_runtime_context().get_placement_group_id()}", flush=True)
holders = [Holder.remote(JOB) for _ in range(2)]
held = [h.hold.remote(HOLD_S) for h in holders]
tasks = [task.remote(JOB, 1.0) for _ in range(2)]  # (no room until the holders go)
while held:  # (short waits: the SIGTERM handler runs between them)
    _ready, held = ray.wait(held, num_returns=len(held), timeout=0.5)
for h in holders:
    ray.kill(h)
ray.get(tasks)
note(JOB, "driver-end")
print(f"driver of job {JOB} done", flush=True)
