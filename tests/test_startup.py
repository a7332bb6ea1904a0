"""What the ``fairshare`` command imports to start (issue 19, "Fast, light clients").

``--version``, ``--help`` and the HTTP clients (``submit``, ``jobs``, ``job``, ``cancel``,
``queues``, ``queues set``, ``status``, ``logs``, ``why``) must not pay for the policies (numpy, scipy), the engine, the reports
(matplotlib) or the live server stack (Ray, FastAPI). Each case runs in a fresh
interpreter (``sys.modules`` of this one already holds everything) and lists the heavy
modules loaded after parsing, or after running, the command. The times themselves are
measured by ``benchmarks/bench_startup.py``, not here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
#: modules a light command must not load
HEAVY = ("numpy", "scipy", "matplotlib", "fairshare.policies", "fairshare.engine", "fairshare.sim",
         "fairshare.api", "fairshare.traces", "ray", "fastapi", "uvicorn", "pydantic")
CLIENT_COMMANDS = [["jobs"], ["queues"], ["cancel", "1"], ["submit", "{jobfile}", "--retries", "0"], ["job", "1"],
                   ["status"], ["queues", "set", "dev", "--weight", "2"], ["logs", "1"], ["jobs", "--watch"],
                   ["why", "1"]]

# The child, given HOW (parse or run), whether the command is a client, the heavy
# modules and the arguments: a server URL that refuses connections (a socket bound but
# not listening, so no test depends on what listens on this machine), then the command
# parsed or run, then the heavy modules loaded, as JSON on the last line of stdout.
CHILD = """
import json, socket, sys
how, client, heavy, argv = sys.argv[1], sys.argv[2] == "client", json.loads(sys.argv[3]), sys.argv[4:]
closed = socket.socket()
closed.bind(("127.0.0.1", 0))
if client:
    argv += ["--server", f"http://127.0.0.1:{closed.getsockname()[1]}", "--token", "x"]
if how == "parse":
    from fairshare.cli import build_parser
    try:
        build_parser().parse_args(argv)
    except SystemExit:  # --version and --help exit once printed
        pass
else:
    from fairshare.cli import main
    status = main(argv)
    assert status == 1, f"expected 'cannot reach' (1), got {status}"
print()
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in heavy or m in heavy
                        or any(m.startswith(h + ".") for h in heavy))))
"""


def heavy_modules_after(how: str, argv: list[str], *, client: bool, tmp_path: Path) -> list[str]:
    """The heavy modules a fresh interpreter holds after it parsed (``how="parse"``) or ran
    (``"run"``) ``fairshare ARGV``."""
    jobfile = tmp_path / "jobs.yaml"
    jobfile.write_text("jobs:\n  - name: j\n    tasks: [{demand: {cpu: 1}, command: 'true'}]\n", encoding="utf-8")
    argv = [a.format(jobfile=jobfile) for a in argv]
    env = dict(os.environ, PYTHONPATH=str(SRC))
    env.pop("FAIRSHARE_SERVER", None)
    env.pop("FAIRSHARE_TOKEN", None)
    done = subprocess.run([sys.executable, "-c", CHILD, how, "client" if client else "-", json.dumps(HEAVY), *argv],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_import_fairshare_loads_no_policy():
    # the library's entry points load on first use; a library user reading a scenario
    # or computing an allocation imports only what that needs
    code = ("import sys, fairshare; loaded = 'fairshare.policies' in sys.modules or 'numpy' in sys.modules; "
            "from fairshare import allocate; print(loaded, callable(allocate), 'fairshare.policies' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(SRC)),
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["False", "True", "True"], done.stderr


def test_the_heavy_list_is_seen_when_loaded(tmp_path):
    # the check itself: a command that needs the policies shows them
    found = heavy_modules_after("parse", ["simulate", "--help"], client=False, tmp_path=tmp_path)
    assert "fairshare.policies" in found and "numpy" in found


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["jobs", "--help"], ["submit", "--help"]],
                         ids=" ".join)
def test_version_and_help_load_nothing_heavy(argv, tmp_path):
    assert heavy_modules_after("parse", argv, client=False, tmp_path=tmp_path) == []


@pytest.mark.parametrize("argv", CLIENT_COMMANDS, ids=lambda argv: " ".join(argv[:2]))
def test_parsing_a_client_command_loads_nothing_heavy(argv, tmp_path):
    assert heavy_modules_after("parse", argv, client=True, tmp_path=tmp_path) == []


@pytest.mark.parametrize("argv", CLIENT_COMMANDS, ids=lambda argv: " ".join(argv[:2]))
def test_running_a_client_command_loads_nothing_heavy(argv, tmp_path):
    # (against a server that refuses: the command runs to its "cannot reach" error)
    assert heavy_modules_after("run", argv, client=True, tmp_path=tmp_path) == []


def test_a_deferred_parser_adds_its_arguments_once_in_order_before_parsing_or_help():
    from fairshare.cli import _DeferredParser

    calls = []

    def first(p):
        calls.append("first")
        p.add_argument("--alpha", type=int)

    def second(p):
        calls.append("second")
        p.add_argument("--beta")

    parser = _DeferredParser(prog="x")
    parser.add_argument("scenario")
    parser.defer(first, second)
    assert calls == []
    assert parser.format_usage() == "usage: x [-h] [--alpha ALPHA] [--beta BETA] scenario\n"
    assert vars(parser.parse_args(["s", "--alpha", "3"])) == {"scenario": "s", "alpha": 3, "beta": None}
    assert "--beta BETA" in parser.format_help()
    assert calls == ["first", "second"]


def test_subcommand_help_lists_the_deferred_flags(capsys):
    # simulate's --placement choices come from the engine, its policy flags from the policies
    from fairshare.cli import _policy_option_flags, main
    from fairshare.engine.placement import STRATEGIES

    assert main(["simulate", "--help"]) == 0
    out = capsys.readouterr().out
    assert f"--placement {{{','.join(STRATEGIES)}}}" in out
    assert all(flag in out for flag in _policy_option_flags())
    assert out.index("--no-fairness-gap") < out.index("--stream") < out.index("policy options")


def test_the_library_and_the_simulation_commands_load_scipy_only_to_solve():
    """``import fairshare.api`` (a library user computing a DRF allocation) and ``simulate
    --help`` do not pay for ``scipy.optimize``: only the slowdown policy's LPs and the
    Pareto audit use it, and they import it where they solve."""
    code = ("import sys, fairshare.api, fairshare.policies\n"
            "from fairshare.cli import build_parser\n"
            "try:\n    build_parser().parse_args(['simulate', '--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m == 'scipy' or m.startswith('scipy.')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(SRC)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"
