"""The conformance checks as a product: ``check_policy`` and ``python -m fairshare.conformance``
on policies defined outside the package.

The policies here live in modules written to ``tmp_path`` and registered nowhere, as a
user's would. The full run over the registry is the suites' own (test_conformance.py,
test_conformance_online.py); its command-line form is run here on two quick checks over
every registered policy and variant: the whole command, 19 policies and variants x 17
checks, took 71 s wall (24 s of CPU) on the shared two-core machine, past the ~60 s a
test may take.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fairshare.conformance import CHECKS, check_policy
from fairshare.conformance.suite import EXEMPTED, FAILED, PASSED, SKIPPED, STALE
from fairshare.policies import REGISTRY

SRC = Path(__file__).resolve().parents[1] / "src"

#: a policy of a user's own, registered nowhere: DRF with another name and citation,
#: exempting itself from the queue weights as DRF does
MY_POLICY = '''
"""My DRF: Ghodsi et al. NSDI'11, Sec. 4.2, under another name."""
from fairshare.policies.drf import DRF


class MyDRF(DRF):
    name = "mydrf"
    citation = "Ghodsi et al. NSDI'11, Sec. 4.2 (a copy)"


class NotAPolicy:
    pass
'''

#: and one with a defect: every job weighs 1 to the sorter
BROKEN_POLICY = '''
from fairshare.policies.drf import DRF


class WeightBlind:
    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, attr):
        return getattr(self._inner, attr)

    def add_job(self, name, queue, weight, demand):
        self._inner.add_job(name, queue, 1.0, demand)


class WeightBlindDRF(DRF):
    name = "weightblind"

    def online(self, *args, **kwargs):
        return WeightBlind(super().online(*args, **kwargs))
'''


def conformance(*argv, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), str(cwd)]))
    return subprocess.run([sys.executable, "-m", "fairshare.conformance", *argv], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


def summary_row(stdout: str, label: str) -> list[str]:
    """The summary table's row of ``label``: passed, exempted, skipped, failed."""
    rows = [line.split() for line in stdout.splitlines() if line.startswith(label + " ")]
    assert rows, f"no summary row for {label}:\n{stdout}"
    return rows[-1][-4:]


@pytest.fixture
def user_modules(tmp_path):
    (tmp_path / "mypolicy.py").write_text(textwrap.dedent(MY_POLICY))
    (tmp_path / "brokenpolicy.py").write_text(textwrap.dedent(BROKEN_POLICY))
    return tmp_path


def test_a_policy_from_a_module_outside_the_package_conforms(user_modules):
    proc = conformance("mypolicy:MyDRF", cwd=user_modules)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from fairshare.conformance.suite import CHECKS

    # every check passes but two: queue weights exempted (inherited from DRF), the slot
    # limit skipped (no slots)
    assert summary_row(proc.stdout, "mypolicy:MyDRF") == [str(len(CHECKS) - 2), "1", "1", "0"]
    assert "mypolicy:MyDRF  queue weights  exempted" in proc.stdout  # the progress line
    assert proc.stdout.rstrip().endswith(f"1 policies, {len(CHECKS)} checks: all conform")


def test_a_policy_from_a_file_path(user_modules):
    proc = conformance("./mypolicy.py:MyDRF", "--check", "capacity", "--check", "allocation weights",
                       cwd=user_modules)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert summary_row(proc.stdout, "./mypolicy.py:MyDRF") == ["2", "0", "0", "0"]


def test_a_broken_policy_exits_1_naming_the_check(user_modules):
    proc = conformance("brokenpolicy:WeightBlindDRF", "--check", "job weights", "--check", "capacity",
                       cwd=user_modules)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert summary_row(proc.stdout, "brokenpolicy:WeightBlindDRF") == ["1", "0", "0", "1"]
    assert "FAILED  brokenpolicy:WeightBlindDRF  job weights: WeightBlindDRF(), job weights, t=" in proc.stdout


def test_every_registered_policy_and_variant_on_two_checks(tmp_path):
    proc = conformance("--check", "allocation weights", "--check", "capacity", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    labels = [name for name in sorted(REGISTRY)]
    labels += [name + "".join(f"[{k}={v}]" for k, v in options.items())
               for name in sorted(REGISTRY) for options in REGISTRY[name].conformance_variants]
    for label in labels:
        summary_row(proc.stdout, label)
    # capacity: exempted for slots (and its variant), skipped for ceei and slowdown
    assert summary_row(proc.stdout, "slots") == ["0", "1", "1", "0"]  # (allocation weights: no static)
    assert summary_row(proc.stdout, "ceei") == ["1", "0", "1", "0"]
    assert summary_row(proc.stdout, "fifo") == ["1", "1", "0", "0"]  # FIFO ignores weights
    assert summary_row(proc.stdout, "hdrf[rescale=False]") == ["1", "0", "0", "0"]  # variants: online only
    assert f"{len(labels)} policies, " in proc.stdout


@pytest.mark.parametrize("target, reason", [
    ("no_such_module:X", "module 'no_such_module' not found"),
    ("mypolicy:Nope", "module 'mypolicy' has no 'Nope'"),
    ("mypolicy:NotAPolicy", "'NotAPolicy' is not a Policy subclass"),
    ("missing.py:X", "no such file 'missing.py'"),
    ("fairshare.policies.base:Policy", "'Policy' is abstract: it does not implement allocate"),
    ("nosuchpolicy", "not a registered policy"),
])
def test_bad_targets_exit_2_naming_the_target_and_the_reason(user_modules, target, reason):
    proc = conformance(target, cwd=user_modules)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"error: {target}: {reason}" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_the_package_does_not_need_pytest(tmp_path):
    proc = subprocess.run([sys.executable, "-c", "import sys, fairshare.conformance.__main__; "
                           "assert 'pytest' not in sys.modules, 'imports pytest'"],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(SRC)), timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_an_unknown_check_is_a_bad_argument(tmp_path):
    proc = conformance("drf", "--check", "no such check", cwd=tmp_path)
    assert proc.returncode == 2 and "no such check" in proc.stderr


# --- check_policy, the library entry --------------------------------------------------------------

class ExemptsWhatItPasses(REGISTRY["drf"]):
    conformance_exemptions = {"empty cluster and queue": "claimed not to apply, but it does",
                              "no such check": "a misspelt exemption"}


def test_check_policy_reports_each_status():
    seen = []
    report = check_policy(ExemptsWhatItPasses, static=["allocation weights"],
                          online=["empty cluster and queue", "slot limit"], progress=seen.append)
    by_check = {r.check: r for r in report.results}
    assert by_check["allocation weights"].status == PASSED
    assert by_check["empty cluster and queue"].status == STALE  # an exemption no longer needed fails
    assert by_check["slot limit"].status == SKIPPED
    assert by_check["no such check"].status == FAILED
    assert not report.ok and seen == report.results
    assert report.policy == "ExemptsWhatItPasses()"
    assert "exemption no longer needed" in str(report)


def test_check_policy_on_an_object_clones_it_and_honours_exemptions():
    report = check_policy(REGISTRY["fifo"](), static=["allocation weights"], online=False, label="fifo")
    assert [(r.check, r.status, r.detail) for r in report.results] == [
        ("allocation weights", EXEMPTED, REGISTRY["fifo"].conformance_exemptions["allocation weights"])]
    assert report.ok and str(report).splitlines()[-1].split() == ["fifo", "0", "1", "0", "0"]
    with pytest.raises(ValueError, match="unknown online check"):
        check_policy(REGISTRY["fifo"], online=["allocation weights"])
    assert set(CHECKS) >= {"capacity", "allocation weights", "slot limit"}
