"""Ray programs without Ray: the ``ray:`` section's validation (paths and reasons), the
placement group's names, bundles and strategy, and the bookkeeping of starts, ends,
stops and acknowledgements (``RayPrograms`` on a fake ``ray`` module)."""

from __future__ import annotations

import pytest

from live_helpers import make_config
from fairshare.engine.scheduler import Launch
from fairshare.live.config import DEFAULT_RAY_GRACE_S, parse_jobs
from fairshare.live.ray_programs import (NODE_PIN, RayPrograms, bundle_for, parse_pg_name, pg_name,
                                         strategy_for)
from fairshare.model.errors import ScenarioError

CONFIG = make_config()


def parse(job: dict):
    return parse_jobs({"jobs": [job]}, CONFIG.resources, CONFIG.nodes, CONFIG.queues)


def ray_job(ray, **extra) -> dict:
    return {"queue": "ads", "ray": ray, "tasks": [{"demand": {"cpu": 1}, "count": 2, **extra}]}


def problems(job: dict) -> dict[str, str]:
    with pytest.raises(ScenarioError) as info:
        parse(job)
    return {e.path: e.reason for e in info.value.errors}


def test_a_ray_job_is_a_gang_with_its_program_and_grace():
    (job,) = parse(ray_job({"entrypoint": "python train.py --epochs 3", "runtime_env": {"pip": ["numpy"]}},
                           checkpoint=30))
    assert job.gang and job.commands == ()
    program = job.program
    assert (program.script, program.module, program.args) == ("train.py", None, ("--epochs", "3"))
    assert (program.grace_s, program.pack) == (30, None)
    (job,) = parse(dict(ray_job({"entrypoint": "python3 -m pkg.main x"}), pack="node"))
    assert (job.program.module, job.program.args, job.program.grace_s) == ("pkg.main", ("x",), DEFAULT_RAY_GRACE_S)
    assert job.program.pack == ("node", None)


@pytest.mark.parametrize("ray, path", [
    ({"entrypoint": "bash run.sh"}, "jobs[0].ray.entrypoint"),  # another program: its Ray work would escape
    ({"entrypoint": "python"}, "jobs[0].ray.entrypoint"),
    ({"entrypoint": "python -c 'x'"}, "jobs[0].ray.entrypoint"),
    ({"entrypoint": "python 'unclosed"}, "jobs[0].ray.entrypoint"),
    ({}, "jobs[0].ray.entrypoint"),
    ({"entrypoint": "python a.py", "runtime_env": {"conda": "x"}}, "jobs[0].ray.runtime_env.conda"),
    ({"entrypoint": "python a.py", "runtime_env": {"pip": "numpy"}}, "jobs[0].ray.runtime_env.pip"),
    ({"entrypoint": "python a.py", "runtime_env": {"env_vars": {"A": 1}}}, "jobs[0].ray.runtime_env.env_vars"),
    ({"entrypoint": "python a.py", "runtime_env": {"working_dir": ""}}, "jobs[0].ray.runtime_env.working_dir"),
    ({"entrypoint": "python a.py", "main": "x"}, "jobs[0].ray.main"),
    ("python a.py", "jobs[0].ray"),
])
def test_a_bad_ray_section_names_its_field(ray, path):
    assert path in problems(ray_job(ray))


def test_a_ray_job_has_no_commands_and_is_not_a_gang_of_false():
    got = problems(dict(ray_job({"entrypoint": "python a.py"}, command="true"), gang=False))
    assert set(got) == {"jobs[0].gang", "jobs[0].tasks[0].command"}


def test_placement_group_names_round_trip_and_belong_to_one_service():
    name = pg_name("abc123", "7", [(11, 1), (12, 2)])
    assert name == "fs/abc123/7/11.1,12.2"
    assert parse_pg_name(name, "abc123") == ("7", [(11, 1), (12, 2)])
    assert parse_pg_name(name, "other") is None
    assert parse_pg_name("fs/abc123/7/x", "abc123") is None


def test_bundles_map_the_demand_and_pin_the_node():
    mapping = {"cpu": ("fs_cpu", 1.0), "memory": ("fs_memory", 1.0), "mic": ("fs_mic", 1.0), "gpu": ("fs_gpu", 1.0)}
    assert bundle_for((2.0, 0.5, 0.0, 1.0), CONFIG.resources, mapping, "gpu-node", True) == \
        {"fs_cpu": 2.0, "fs_memory": 0.5, "fs_gpu": 1.0, "fs_node_gpu-node": NODE_PIN}
    native = {"cpu": ("CPU", 1.0), "memory": ("memory", 2.0 ** 30), "mic": ("mic", 1.0), "gpu": ("GPU", 1.0)}
    assert bundle_for((1.0, 2.0, 0.0, 0.0), CONFIG.resources, native, "n", False) == \
        {"CPU": 1.0, "memory": 2.0 * 2 ** 30}
    assert [strategy_for(p) for p in (None, ("node", None), ("attribute", "rack"))] == \
        ["PACK", "STRICT_PACK", "PACK"]


class FakeRef:
    def __init__(self, value=None):
        self.value, self.ready = value, False


class FakeRay:
    """What ``RayPrograms`` calls of ``ray``, recording the placement groups and kills."""

    def __init__(self):
        self.groups, self.killed, self.refs = [], [], []

    def remote(self, target=None, **_options):
        ray = self

        class Handle:
            def options(self, **kw):
                return self

            def remote(self, *args, **kw):
                return Driver()

        class Driver:
            class run:
                @staticmethod
                def remote(*args):
                    ref = FakeRef()
                    ray.refs.append(ref)
                    return ref

        return Handle() if target is not None else (lambda fn: Handle())

    def wait(self, refs, num_returns, timeout):
        return [r for r in refs if r.ready], [r for r in refs if not r.ready]

    def get(self, ref):
        return ref.value

    def kill(self, actor):
        self.killed.append(actor)


@pytest.fixture
def programs(monkeypatch):
    import importlib

    pytest.importorskip("ray", reason="the live extra (ray) is not installed")
    pgmod = importlib.import_module("ray.util.placement_group")  # (the module: ray.util's name is the function)
    fake = FakeRay()
    removed = []
    monkeypatch.setattr(pgmod, "placement_group", lambda bundles, **kw: fake.groups.append((bundles, kw)) or
                        len(fake.groups))
    monkeypatch.setattr(pgmod, "remove_placement_group", removed.append)
    mapping = {r: ("fs_" + r, 1.0) for r in CONFIG.resources}
    progs = RayPrograms(fake, CONFIG.resources, mapping, lambda: {"cpu-node"}, lambda: None, 1024, None)
    progs.service_id = "sid"
    progs._terminate = lambda prog: fake.killed.append(("SIGTERM", prog.job))
    return progs, fake, removed


def launches(job="7"):
    return [Launch(t, job, "worker", 0, "cpu-node", (1.0, 0.0, 0.0, 0.0), attempt=1) for t in (12, 11)]


def start(progs):
    (job,) = parse(ray_job({"entrypoint": "python a.py"}, checkpoint=0.05))
    for la in launches():
        progs.gather(la, job.program, {})
    assert progs.poll() == []


def test_a_gang_becomes_one_placement_group_at_the_next_poll(programs):
    progs, fake, _removed = programs
    start(progs)
    ((bundles, options),) = fake.groups
    assert bundles == [{"fs_cpu": 1.0, "fs_node_cpu-node": NODE_PIN}] * 2
    assert options == {"strategy": "PACK", "name": "fs/sid/7/11.1,12.1", "lifetime": "detached"}
    assert progs.running() == 2


def test_the_end_of_the_program_ends_every_task_and_the_ack_removes_the_group(programs):
    progs, fake, removed = programs
    start(progs)
    fake.refs[0].value, fake.refs[0].ready = 3, True
    ends = progs.poll()
    assert [(e.task_id, e.ok, e.reason, e.attempt) for e in ends] == \
        [(11, False, "exit status 3", 1), (12, False, "exit status 3", 1)]
    progs.acknowledge([(11, 1)])
    assert removed == []  # (one end recorded: not yet)
    progs.acknowledge([(12, 1)])
    assert removed == [1] and progs.running() == 0


def test_a_kill_reports_the_task_sigterms_once_and_removes_after_the_grace(programs):
    progs, fake, removed = programs
    start(progs)
    assert progs.kill(11) and progs.kill(12) and not progs.kill(99)
    assert fake.killed == [("SIGTERM", "7")]  # one SIGTERM for the whole gang
    ends = progs.poll()
    assert [(e.task_id, e.reason) for e in ends] == [(11, "cancelled"), (12, "cancelled")]
    assert removed == []  # within the grace (0.05 s)
    import time

    time.sleep(0.06)
    progs.poll()
    assert removed == [1]


def test_a_tenant_with_run_as_may_not_submit_a_ray_program(tmp_path):
    from test_live_run_as import run_as_doc, some_user

    from fairshare.live.auth import Principal
    from fairshare.live.commands import CommandBook
    from fairshare.live.config import parse_config
    from fairshare.live.service import LiveError, LiveService
    from fairshare.live.store import Store
    from live_helpers import ManualExecutor

    config = parse_config(run_as_doc(some_user()), "c.yaml")
    commands = CommandBook(workdir=str(tmp_path), run_as=config.auth.run_as)
    svc = LiveService(config, Store(tmp_path / "fs.db"), ManualExecutor(config.nodes, commands), policy="drf",
                      commands=commands)
    with pytest.raises(LiveError) as info:
        svc.submit(Principal("alice", queues=("ads",)), {"jobs": [ray_job({"entrypoint": "python a.py"})]})
    assert info.value.status == 403 and [e.path for e in info.value.errors] == ["jobs[0].ray"]
