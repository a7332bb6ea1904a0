"""``fairshare completion bash|zsh``: the script is generated from the parser, and bash,
given the words of a command line as it gives them to a completion function (COMP_WORDS,
COMP_CWORD), completes commands, actions, flags and their values."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from fairshare.cli import main
from fairshare.policies import REGISTRY

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


@pytest.fixture(scope="module")
def script(tmp_path_factory):
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["completion", "bash"]) == 0
    path = tmp_path_factory.mktemp("completion") / "fairshare.bash"
    path.write_text(out.getvalue())
    return path


def complete(script, *words: str) -> list[str]:
    """What bash offers for the last of ``words`` (``fairshare ... <TAB>``), run in an
    empty directory (file names are offered where a file may come)."""
    line = " ".join(f"'{w}'" for w in words)
    program = (f"source {script}; COMP_WORDS=({line}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); "
               "_fairshare; printf '%s\\n' \"${COMPREPLY[@]}\"")
    done = subprocess.run(["bash", "-c", program], cwd=script.parent.parent, capture_output=True, text=True,
                          timeout=60, check=True)
    return [w for w in done.stdout.splitlines() if w]


def test_a_command_completes_from_its_prefix(script):
    assert complete(script, "fairshare", "sim") == ["simulate"]
    assert set(complete(script, "fairshare", "q")) == {"queues"}
    assert {"jobs", "job", "logs", "completion"} <= set(complete(script, "fairshare", ""))


def test_policy_flags_offer_the_registered_policies(script):
    assert complete(script, "fairshare", "simulate", "default", "--policy", "") == list(REGISTRY)
    assert complete(script, "fairshare", "serve", "--policy", "hd") == [p for p in REGISTRY if p.startswith("hd")]
    assert complete(script, "fairshare", "compare", "x", "--reference", "") == list(REGISTRY)


def test_flags_choices_and_actions_follow_the_command_path(script):
    assert complete(script, "fairshare", "simulate", "x", "--placement", "") == ["first-fit", "best-fit", "packing"]
    assert complete(script, "fairshare", "queues", "") == ["set"]
    # a flag's value is skipped when finding the path: `--server set` is not the action
    assert complete(script, "fairshare", "queues", "--server", "set", "--no-") == []
    assert set(complete(script, "fairshare", "queues", "set", "dev", "--no-")) == {"--no-guarantee", "--no-limit"}
    assert set(complete(script, "fairshare", "jobs", "--w")) == {"--watch"}
    assert complete(script, "fairshare", "completion", "") == ["bash", "zsh"]  # (a positional's choices)


def test_zsh_gets_the_same_function_through_bashcompinit(capsys):
    assert main(["completion", "zsh"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("#compdef fairshare") and "bashcompinit" in out and "complete -F _fairshare fairshare" in out
    if shutil.which("zsh"):
        subprocess.run(["zsh", "-n"], input=out, text=True, check=True, timeout=60)
