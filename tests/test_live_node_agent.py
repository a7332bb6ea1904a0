"""The node agent's logic without Ray (``live.node_agent.NodeAgent`` is a plain class;
``RayExecutor`` runs it as a detached actor): results kept until acknowledged, one run
per (task, attempt), fencing by serve incarnation, kills by process group, and commands
that die with the agent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from fairshare.live.node_agent import FENCED, REFUSED, STALE, STARTED, NodeAgent

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="process groups and PR_SET_PDEATHSIG: Linux")


def ends(agent: NodeAgent, incarnation: int = 1, ack=(), after: int = 0, wait_s: float = 10.0):
    return agent.reports(incarnation, list(ack), after, wait_s)[1]


def gone(pid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except OSError:
            return True
        time.sleep(0.02)
    return False


def test_an_end_is_kept_until_acknowledged():
    agent = NodeAgent("n1")
    assert agent.hello(1)["runs"] == []
    answer, pid = agent.run(7, 1, 1, ["sh", "-c", "echo out; exit 3"], False, {}, None)
    assert answer == STARTED and int(pid) > 0
    (end,) = ends(agent)
    assert end[:4] == (7, 1, 3, "out\n")
    # not acknowledged: a restarted serve (after=0) is told again, as is a listing
    assert [e[:3] for e in ends(agent, after=0)] == [(7, 1, 3)]
    assert [r[:2] + r[4:5] for r in agent.hello(2)["runs"]] == [(7, 1, 3)]
    # acknowledged: forgotten
    assert ends(agent, incarnation=2, ack=[(7, 1)], wait_s=0.05) == []
    assert agent.hello(2)["runs"] == []


def test_reports_wait_for_the_next_end_after_the_seq_seen():
    agent = NodeAgent("n1")
    agent.run(1, 1, 1, ["true"], False, {}, None)
    (first,) = ends(agent)
    t0 = time.monotonic()
    assert ends(agent, after=first[4], wait_s=0.2) == []  # nothing newer: waited, empty
    assert time.monotonic() - t0 >= 0.15
    agent.run(2, 1, 1, ["sh", "-c", "sleep 0.2"], False, {}, None)
    assert [e[0] for e in ends(agent, after=first[4])] == [2]


def test_a_repeated_run_is_answered_as_the_first_and_starts_nothing():
    agent = NodeAgent("n1")
    first = agent.run(3, 1, 1, ["sleep", "5"], False, {}, None)
    assert agent.run(3, 1, 1, ["sleep", "5"], False, {}, None) == first
    assert agent.running() == 1
    assert agent.kill(3, 1, 1)
    assert ends(agent)[0][:3] == (3, 1, -signal.SIGKILL)


def test_older_incarnations_are_fenced_off():
    agent = NodeAgent("n1")
    agent.hello(5)
    assert agent.run(1, 1, 4, ["true"], False, {}, None)[0] == FENCED
    assert agent.hello(4)["fenced"]
    assert agent.running() == 0 and agent.hello(5)["runs"] == []
    agent.run(1, 1, 5, ["true"], False, {}, None)
    ends(agent, incarnation=5)
    # an acknowledgement from an older serve does not drop the result the newer needs
    assert agent.reports(4, [(1, 1)], 0, 0.0)[0] == 5
    assert [r[:2] for r in agent.hello(5)["runs"]] == [(1, 1)]
    assert not agent.drop(1, 1, 4) and not agent.kill(1, 1, 4)


def test_a_newer_attempt_replaces_an_older_one_never_both_at_once():
    agent = NodeAgent("n1")
    _, old_pid = agent.run(9, 1, 1, ["sleep", "30"], False, {}, None)
    assert agent.run(9, 2, 1, ["true"], False, {}, None)[0] == STARTED
    assert gone(int(old_pid))
    assert agent.run(9, 1, 1, ["true"], False, {}, None)[0] == STALE  # an older attempt, late


def test_kill_stops_the_commands_process_group():
    agent = NodeAgent("n1")
    _, pid = agent.run(4, 1, 1, ["sh", "-c", "sleep 30 & echo $!; wait"], False, {}, None)
    time.sleep(0.3)
    child = int(open(f"/proc/{pid}/task/{pid}/children").read().split()[0])
    assert agent.kill(4, 1, 1)
    assert gone(int(pid)) and gone(child)  # the shell and what it started
    assert ends(agent)[0][:3] == (4, 1, -signal.SIGKILL)


def test_drop_kills_and_forgets_an_attempt_serve_does_not_know():
    agent = NodeAgent("n1")
    _, pid = agent.run(5, 1, 1, ["sleep", "30"], False, {}, None)
    assert agent.drop(5, 1, 2)
    assert gone(int(pid))
    assert ends(agent, incarnation=2, wait_s=0.3) == []  # its end is not reported
    assert agent.hello(2)["runs"] == []


def test_a_command_that_cannot_start_is_refused_and_ends_with_127():
    agent = NodeAgent("n1")
    answer, reason = agent.run(6, 1, 1, ["/nonexistent/prog"], False, {}, None)
    assert answer == REFUSED and "cannot run '/nonexistent/prog'" in reason
    assert ends(agent)[0][:3] == (6, 1, 127)


def test_commands_die_with_the_agent(tmp_path):
    """SIGKILL of the agent's process (its node died): its commands get SIGKILL too."""
    script = ("import sys, time; sys.path[:0] = sys.argv[1:2]\n"
              "from fairshare.live.node_agent import NodeAgent\n"
              "a = NodeAgent('n1'); print(a.run(1, 1, 1, ['sleep', '60'], False, {}, None)[1], flush=True)\n"
              "time.sleep(60)\n")
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    proc = subprocess.Popen([sys.executable, "-c", script, src], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(proc.stdout.readline())
        assert not gone(pid, 0.2)
        proc.kill()
        proc.wait()
        assert gone(pid)
    finally:
        if proc.poll() is None:
            proc.kill()
