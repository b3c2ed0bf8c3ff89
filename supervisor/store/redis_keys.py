"""Every key name of a Redis store's namespace, in one place; what each key holds is written
beside the store's commands and scripts that use it.
"""

from __future__ import annotations


class RedisKeys:
    """Every key name of one namespace, in one place."""

    def __init__(self, namespace: str) -> None:
        self.ns = namespace
        self.agent_index = f"{namespace}:agents"
        self.message_seq = f"{namespace}:message:seq"
        self.events = f"{namespace}:events"
        self.event_seq = f"{namespace}:event:seq"
        self.focus = f"{namespace}:focus"
        self.lease_seq = f"{namespace}:lease:seq"
        self.holders = f"{namespace}:holders"
        self.holds = f"{namespace}:holds"
        self.holder_prefix = f"{namespace}:holder:"
        self.batch_steps = f"{namespace}:batch_steps"

    def agent(self, uuid: str) -> str:
        return f"{self.ns}:agent:{uuid}"

    def children(self, uuid: str) -> str:
        return f"{self.ns}:children:{uuid}"

    def messages(self, uuid: str) -> str:
        return f"{self.ns}:messages:{uuid}"

    def ticket(self, ticket: str) -> str:
        return f"{self.ns}:ticket:{ticket}"

    def lease_queue(self, session_id: str) -> str:
        return f"{self.ns}:lease:{session_id}:queue"

    def lease_ticket_prefix(self, session_id: str) -> str:
        return f"{self.ns}:lease:{session_id}:ticket:"
