"""What mypy checks of the Grove interface (supervisor/contract.py): each implementation, local
and served, is a `GroveAPI`, their turns `TurnAPI`s, their records and messages views, their
reads `ReadsAPI`s. Nothing here runs: tests/unit/test_grove_contract.py has mypy check it.
"""

from __future__ import annotations

from grove.server.client import RemoteGrove
from grove.server.remote_reads import RemoteReads
from grove.server.remote_records import RemoteMessage, RemoteRecord
from grove.server.remote_turn import RemoteTurn
from grove.supervisor.api import Grove
from grove.supervisor.api_turn import Turn
from grove.supervisor.contract import AgentView, GroveAPI, MessageView, ReadsAPI, TurnAPI
from grove.supervisor.reads import StoreReads
from grove.supervisor.store.records import AgentRecord, MessageRecord


def local_grove(grove: Grove) -> GroveAPI:
    return grove


def served_grove(grove: RemoteGrove) -> GroveAPI:
    return grove


def local_turn(turn: Turn) -> TurnAPI:
    return turn


def served_turn(turn: RemoteTurn) -> TurnAPI:
    return turn


def local_record(record: AgentRecord) -> AgentView:
    return record


def served_record(record: RemoteRecord) -> AgentView:
    return record


def local_message(message: MessageRecord) -> MessageView:
    return message


def served_message(message: RemoteMessage) -> MessageView:
    return message


def local_reads(reads: StoreReads) -> ReadsAPI:
    return reads


def served_reads(reads: RemoteReads) -> ReadsAPI:
    return reads
