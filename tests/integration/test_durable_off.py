"""`[hosts] durable_steps = false` over a real Ray and the simulator: nothing of a turn is
stored before it ends, so a turn whose host is SIGKILLed during its second tool call runs
again whole, its side effects with it (what durable steps spare, tests/integration/
test_durable_turns.py).
"""

from __future__ import annotations

from pathlib import Path

from grove.providers.http import Endpoint
from grove.simulator import SimulatorConfig, SimulatorThread
from grove.supervisor.store import open_store
from tests.integration.groves import running_grove
from tests.integration.host_kills import finish_all, kill_host
from tests.integration.test_durable_turns import KEY, SLOW_LABEL, mark, three_calls, wait_for_label


def mark_slow_once(path: str, label: str) -> str:
    """`mark`, its slow call slow only the first time: the turn runs again whole after its host
    was killed during that call, and waiting that call out again would prove nothing.

    Args:
        path: the file counting side effects.
        label: which call this is.
    """
    if label != SLOW_LABEL or label not in Path(path).read_text().split():
        return mark(path, label)
    with open(path, "a") as counted:
        counted.write(label + "\n")
    return f"marked {label}"


def test_with_durable_steps_off_a_cut_off_turn_runs_again_from_its_prompt(tmp_path: Path) -> None:
    path = tmp_path / "effects.txt"
    off = {"GROVE_HOSTS__DURABLE_STEPS": "false"}
    with (
        SimulatorThread(SimulatorConfig(api_key=KEY, tokens=4)) as simulator,
        running_grove(
            tmp_path, env=off, endpoint=Endpoint(base_url=simulator.base_url, api_key=KEY)
        ) as grove,
    ):
        root = grove.create_root("claude-haiku-4-5", tools=[mark_slow_once]).uuid
        (child,) = grove.fork_many(root, [three_calls("mark_slow_once", path)])
        wait_for_label(path, SLOW_LABEL)
        store = open_store(grove.settings.store)
        try:
            stored = [m.kind for m in store.agent_messages(child)]
        finally:
            store.close()
        assert "assistant" not in stored and "tool_result" not in stored
        kill_host(grove, grove.provider_identity(child)["host"])
        (result,) = finish_all(grove, [child]).values()
        assert result is not None and result.ok, result
    assert path.read_text().split() == ["1", "2", "1", "2", "3"]
