"""Mail routed in batches over a real local Ray: stored in one go, steered into held agents
(the model sees it on its next turn), refused whole for an ended or unknown recipient.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from grove.supervisor import Grove
from grove.supervisor.errors import CommandError
from grove.supervisor.store import Store

pytestmark = pytest.mark.grove(hosts=2)


def finished_children(grove: Grove, count: int) -> tuple[str, list[str]]:
    root = grove.create_root("claude-haiku-4-5")
    children = grove.fork_many(root.uuid, [f"task {i}" for i in range(count)])
    pending = set(children)
    while pending:
        pending -= set(grove.wait_any(sorted(pending), 30))
    return root.uuid, children


def test_a_batch_is_stored_in_order_with_one_event(grove: Grove, store: Store) -> None:
    _, children = finished_children(grove, 6)
    mails = [(children[i % 6], children[(i + 1) % 6], f"note {i}") for i in range(300)]
    last_event = store.events(limit=1_000_000)[-1].id
    ids = grove.route_mail(mails)
    assert len(ids) == 300 and ids == sorted(ids)
    for child in children:
        stored = [m for m in store.agent_messages(child) if m.kind == "mail"]
        expected = [(s, t) for s, r, t in mails if r == child]
        assert [(m.data["sender"], m.content) for m in stored] == expected
    events = [e for e in store.events(after_id=last_event, limit=1000) if e.kind == "MailRouted"]
    assert [(e.payload["count"], e.payload["message_ids"]) for e in events] == [(300, ids)]
    assert grove.route_mail([]) == []


def test_mail_reaches_the_model_of_a_held_agent_on_its_next_turn(grove: Grove) -> None:
    _, (first, second) = finished_children(grove, 2)
    assert grove.provider_identity(second)["provider"] is not None  # held, provider built
    grove.route_mail([(first, second, '[[sim reply="mail seen"]]')])
    assert grove.ask(second, "anything new?").text == "mail seen"
    assert grove.ask(first, "anything new?").text != "mail seen"


def test_a_batch_with_an_ended_or_unknown_recipient_stores_nothing(
    grove: Grove, store: Store
) -> None:
    root, (alive, doomed) = finished_children(grove, 2)
    assert grove.dispatch(root, f"/kill {doomed}").ok
    before = store.last_message_id()
    with pytest.raises(CommandError, match=f"Agent {doomed} is dead"):
        grove.route_mail([(root, alive, "fine"), (root, doomed, "too late")])
    with pytest.raises(CommandError):
        grove.route_mail([(root, alive, "fine"), (root, "0000nosuchagent", "lost")])
    assert store.last_message_id() == before


def test_wait_returns_at_once_when_nothing_can_send_mail(grove: Grove) -> None:
    root = grove.create_root("claude-haiku-4-5").uuid
    assert grove.ask(root, "[[sim reply=done]] hi").ok
    # Its own turn has ended and nothing else in its tree works: no waiting out the hour.
    assert grove.dispatch(root, "/wait 3600").text == "Nothing arrived"


def test_wait_takes_the_first_mail_or_ends_with_the_last_turn_of_the_tree(grove: Grove) -> None:
    root = grove.create_root("claude-haiku-4-5").uuid
    (worker,) = grove.fork_many(root, ["[[sim ttft_ms=600000]] a long task"])
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(grove.dispatch, root, "/wait 3600")
        grove.route_mail([(worker, root, "halfway there")])
        assert waiting.result(timeout=60).text == f"{worker}: mail: halfway there"
        waiting = pool.submit(grove.dispatch, root, "/wait 3600")
        assert grove.cancel(worker)  # the tree's last turn ends, with no mail sent
        assert waiting.result(timeout=60).text == "Nothing arrived"
