"""The supervisor's core with a host's core in the same process, without Ray: the host is handed
over as its contract (HostAPI), as a deployment hands it a RayProxy's, and a turn begun there
runs, is stored once and answers; the provider is the simulator over real HTTP.
"""

from __future__ import annotations

from pathlib import Path

from grove.actors.agent.choice import ModelChoice
from grove.actors.host.core import AgentHostCore, HostParts
from grove.actors.host.tickets import Ticket
from grove.actors.turn_result import TurnResult
from grove.providers.factory import create_provider
from grove.providers.http import Endpoint
from grove.providers.model_specs import ModelSpec
from grove.providers.stream_events import Provider
from grove.simulator import SimulatorConfig, SimulatorThread
from grove.supervisor.budget import BudgetDesk
from grove.supervisor.core import SupervisorCore
from grove.supervisor.core.parts import CoreParts
from grove.supervisor.store import open_store

KEY = "sk-in-process-5d1c"
MODEL = ModelSpec(provider="anthropic", model="claude-sonnet-5-5")


async def test_a_turn_on_a_host_core_in_process_is_stored_once_and_answers(tmp_path: Path) -> None:
    with SimulatorThread(SimulatorConfig(api_key=KEY)) as simulator:
        endpoint = Endpoint(base_url=simulator.base_url, api_key=KEY)

        def make_provider(choice: ModelChoice) -> Provider:
            return create_provider(choice.provider, endpoint=endpoint)

        async def report(ticket: Ticket, result: TurnResult) -> None:
            core.complete_turn(ticket, result)

        host = AgentHostCore("local", HostParts(make_provider=make_provider, report=report))
        store = open_store(f"sqlite:///{tmp_path / 'grove.sqlite3'}")
        core = SupervisorCore(
            CoreParts(store=store, hosts={"local": host}, holder="in-process"),
            budgets=BudgetDesk,
        )
        root = core.create_root(MODEL)
        try:
            turn = await core.begin_turn(root.uuid, '[[sim reply="answered here"]] hello')
            assert turn.host_id == "local"
            result = await core.wait_turn(root.uuid, 30)
            assert result is not None and result.ok, result
            assert result.text == "answered here"
            kinds = [(m.kind, m.content) for m in store.agent_messages(root.uuid)]
            assert kinds == [
                ("user", '[[sim reply="answered here"]] hello'),
                ("assistant", "answered here"),
            ]
        finally:
            await host.drop(root.uuid)
            store.close()
