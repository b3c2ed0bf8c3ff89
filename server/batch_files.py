"""What the service keeps of each batch beside its records, so that a restarted service takes its
batches up again: the tasks as submitted, and a description (root, options, and once over its end).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grove.server.files import private_file
from grove.supervisor.batch.summary import Totals
from grove.supervisor.batch.tasks import id_key


@dataclass(kw_only=True, slots=True)
class BatchFiles:
    """One batch's files under the service's batch directory: `ID.jsonl` (its records),
    `ID.tasks.jsonl` (its tasks as submitted), `ID.batch.json` (the rest)."""

    directory: Path
    id: str

    @property
    def output(self) -> Path:
        return self.directory / f"{self.id}.jsonl"

    @property
    def tasks(self) -> Path:
        return self.directory / f"{self.id}.tasks.jsonl"

    @property
    def description(self) -> Path:
        return self.directory / f"{self.id}.batch.json"

    def create(self, body: bytes, described: dict[str, Any]) -> None:
        """A new batch's files (prompts and replies: 0600), before any of it runs."""
        private_file(self.output)
        private_file(self.tasks).write_bytes(body)
        self.describe(described)

    def describe(self, described: dict[str, Any]) -> None:
        """Write the description whole (a service killed meanwhile finds the one before)."""
        partial = private_file(self.description.with_suffix(".partial"))
        partial.write_text(json.dumps(described))
        os.replace(partial, self.description)


@dataclass(kw_only=True, slots=True)
class Recorded:
    """What a batch's records say so far: the ids recorded and their totals."""

    ids: set[str] = field(default_factory=set)
    totals: Totals = field(default_factory=Totals)


def read_recorded(output: Path, total: int) -> Recorded:
    """Count the whole records of `output` (a torn last line is not one: its task runs again)."""
    recorded = Recorded(totals=Totals(total=total))
    try:
        data = output.read_bytes()
    except FileNotFoundError:
        return recorded
    for line in data[: data.rfind(b"\n") + 1].splitlines():
        record = json.loads(line)
        recorded.ids.add(id_key(record["id"]))
        recorded.totals.count(record)
    return recorded


def described_batches(directory: Path) -> list[tuple[BatchFiles, dict[str, Any]]]:
    """Every batch described under `directory`, oldest first, with its description."""
    found = []
    for path in directory.glob("*.batch.json"):
        files = BatchFiles(directory=directory, id=path.name.removesuffix(".batch.json"))
        found.append((files, json.loads(path.read_text())))
    return sorted(found, key=lambda item: float(item[1]["started"]))
