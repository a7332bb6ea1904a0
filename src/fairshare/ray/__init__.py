"""fairshare for Ray users: a Python function or script submitted to ``fairshare serve``
as a Ray program (docs/live.md, "Ray programs").

serve admits the program's bundles as a gang by fair share, reserves them as a Ray
placement group and runs the program inside it, so every task and actor it creates is
held to them::

    import fairshare.ray

    def train(epochs):
        ...  # ray.remote tasks and actors, asking fairshare.ray.options(cpu=1)

    job_id = fairshare.ray.submit(train, 3, bundles=[{"cpu": 1}] * 4, queue="ads.prod")

    @fairshare.ray.job(bundles=[{"cpu": 2, "gpu": 1}], queue="ads.prod", priority=5)
    def evaluate(path): ...

    evaluate.submit("s3://...")  # a job id; evaluate(...) still runs here

The function and its arguments travel pickled (``ray.cloudpickle``: a function of
``__main__`` by value, one of a module by reference, so that module must be importable
on the cluster: ``runtime_env={"working_dir": "."}`` uploads it) in the entrypoint
``python -m fairshare.ray.call``; serve refuses an entrypoint above its command limit.
"""

from __future__ import annotations

import base64
import functools
import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fairshare.client import Client, ClientError

#: the environment variable serve gives a program: resource -> [Ray resource, Ray units per unit]
RESOURCES_ENV = "FAIRSHARE_RAY_RESOURCES"


def program_job(entrypoint: str, bundles: Sequence[Mapping[str, float]], *, queue: str, name: str | None = None,
                priority: int = 0, pack: str | Mapping[str, str] | None = None,
                runtime_env: Mapping[str, Any] | None = None, checkpoint: float | None = None) -> dict:
    """The job document of a Ray program: one task class per distinct bundle, its count
    the number of such bundles (in the order first seen)."""
    if not bundles:
        raise ClientError("bundles: must name at least one bundle, e.g. [{'cpu': 1}]")
    classes: dict[str, dict] = {}
    for i, bundle in enumerate(bundles):
        if not isinstance(bundle, Mapping) or not bundle:
            raise ClientError(f"bundles[{i}]: must be a mapping of resource amounts, e.g. {{'cpu': 1}}, "
                              f"got {bundle!r}")
        key = json.dumps(dict(bundle), sort_keys=True)
        if key in classes:
            classes[key]["count"] += 1
        else:
            classes[key] = {"class": f"bundle{len(classes)}", "demand": dict(bundle), "count": 1}
            if checkpoint is not None:
                classes[key]["checkpoint"] = checkpoint
    job: dict[str, Any] = {"queue": queue, "ray": {"entrypoint": entrypoint}, "tasks": list(classes.values())}
    if name is not None:
        job["name"] = name
    if priority:
        job["priority"] = priority
    if pack is not None:
        job["pack"] = pack
    if runtime_env:
        job["ray"]["runtime_env"] = dict(runtime_env)
    return job


def entrypoint_of(fn: Callable, args: tuple, kwargs: Mapping[str, Any]) -> str:
    """``python -m fairshare.ray.call PAYLOAD``: ``fn(*args, **kwargs)`` pickled."""
    from ray import cloudpickle

    payload = base64.urlsafe_b64encode(cloudpickle.dumps((fn, tuple(args), dict(kwargs)))).decode("ascii")
    return f"python -m fairshare.ray.call {payload}"


def submit(fn: Callable, *args: Any, bundles: Sequence[Mapping[str, float]], queue: str, priority: int = 0,
           name: str | None = None, pack: str | Mapping[str, str] | None = None,
           runtime_env: Mapping[str, Any] | None = None, checkpoint: float | None = None,
           server: str | None = None, token: str | None = None, client: Client | None = None,
           **kwargs: Any) -> int:
    """Submit ``fn(*args, **kwargs)`` as a Ray program whose placement group is
    ``bundles``; returns the job id. The server: ``client``, else ``server`` and
    ``token``, else the client configuration (``Client.from_profile``: the environment
    over the profile, as ``fairshare submit`` reads them)."""
    doc = program_job(entrypoint_of(fn, args, kwargs), bundles, queue=queue,
                      name=name or getattr(fn, "__name__", None), priority=priority, pack=pack,
                      runtime_env=runtime_env, checkpoint=checkpoint)
    return _client(server, token, client).submit([doc]).ids[0]


def job(*, bundles: Sequence[Mapping[str, float]], queue: str, **options: Any) -> Callable[[Callable], Callable]:
    """A decorator: ``f.submit(*args, **kwargs)`` submits ``f(*args, **kwargs)`` as
    ``submit`` does with these options; calling ``f`` still runs it here."""

    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def here(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

        here.submit = lambda *args, **kwargs: submit(fn, *args, bundles=bundles, queue=queue, **options, **kwargs)
        return here

    return wrap


def options(**amounts: float) -> dict[str, Any]:
    """``ray.remote`` options for a task or actor of a program that asks for fairshare
    amounts (``options(cpu=1)``), in the Ray resources serve reserved its bundles in
    (``fs_cpu`` on a local cluster, ``CPU`` on one without fairshare's resources):
    ``@ray.remote(**fairshare.ray.options(cpu=1))``. Outside a program (no mapping),
    the native names."""
    mapping = json.loads(os.environ.get(RESOURCES_ENV, "{}"))
    native = {"cpu": ("CPU", 1.0), "gpu": ("GPU", 1.0), "memory": ("memory", float(2 ** 30))}
    out: dict[str, Any] = {"num_cpus": 0, "resources": {}}
    for resource, amount in amounts.items():
        ray_name, units = mapping.get(resource) or native.get(resource, (resource, 1.0))
        value = amount * units
        if ray_name == "CPU":
            out["num_cpus"] = value
        elif ray_name == "GPU":
            out["num_gpus"] = value
        elif ray_name == "memory":
            out["memory"] = value
        else:
            out["resources"][ray_name] = value
    return out


def _client(server: str | None, token: str | None, client: Client | None) -> Client:
    if client is not None:
        return client
    if server is not None or token is not None:
        if server is None or token is None:
            raise ClientError("server and token: give both, or neither (the client configuration is read)")
        return Client(server, token)
    return Client.from_profile()
