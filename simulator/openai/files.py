"""OpenAI's Files API as the simulator keeps it: upload (multipart), list, retrieve, content and
delete under `/v1/files`, holding batch input files and the output and error files of batches.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from email import policy
from email.parser import BytesParser
from typing import Any

from grove.simulator.http11 import HTTPRequest
from grove.simulator.openai.chat import OpenAIChat
from grove.simulator.wire import BINARY_CONTENT_TYPE, Reply, random_id

_ROUTE = re.compile(r"/v1/files(?:/(?P<id>[^/]+)(?P<content>/content)?)?")
PURPOSES = (
    "assistants",
    "assistants_output",
    "batch",
    "batch_output",
    "fine-tune",
    "fine-tune-results",
    "vision",
    "user_data",
)


@dataclass(frozen=True, slots=True)
class StoredFile:
    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.data),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "expires_at": None,
            "status_details": None,
        }


class OpenAIFiles:
    """The `/v1/files` routes and the files they keep, in `api`'s (OpenAI's) errors."""

    def __init__(self, api: OpenAIChat) -> None:
        self.api = api
        self._files: dict[str, StoredFile] = {}
        self._lock = threading.Lock()

    def handles(self, request: HTTPRequest) -> bool:
        return _ROUTE.fullmatch(request.path) is not None

    def add(self, filename: str, purpose: str, data: bytes) -> StoredFile:
        stored = StoredFile(
            id=random_id("file-", 22),
            filename=filename,
            purpose=purpose,
            data=data,
            created_at=int(time.time()),
        )
        with self._lock:
            self._files[stored.id] = stored
        return stored

    def find(self, file_id: str) -> StoredFile | None:
        with self._lock:
            return self._files.get(file_id)

    def missing(self, file_id: str) -> Reply:
        """The API's answer naming a file it does not have."""
        return self.api.error("not_found", f"No such File object: {file_id}", param="id")

    def answer(self, request: HTTPRequest, body: Any) -> Reply:
        route = _ROUTE.fullmatch(request.path)
        assert route is not None, "the server routes only handled paths here"
        file_id = route["id"]
        if file_id is None:
            if request.method == "POST":
                return self._upload(request)
            if request.method == "GET":
                with self._lock:
                    listed = [stored.as_json() for stored in self._files.values()]
                return Reply(status=200, body={"object": "list", "data": listed, "has_more": False})
            return self.api.error("method_not_allowed")
        stored = self.find(file_id)
        if stored is None:
            return self.missing(file_id)
        if route["content"] is not None and request.method == "GET":
            return Reply(status=200, body={}, raw=stored.data, content_type=BINARY_CONTENT_TYPE)
        if route["content"] is None and request.method == "GET":
            return Reply(status=200, body=stored.as_json())
        if route["content"] is None and request.method == "DELETE":
            with self._lock:
                self._files.pop(file_id, None)
            return Reply(status=200, body={"id": file_id, "object": "file", "deleted": True})
        return self.api.error("method_not_allowed")

    def _upload(self, request: HTTPRequest) -> Reply:
        content_type = request.headers.get("content-type", "")
        if not content_type.startswith("multipart/form-data"):
            return self.api.error(
                "invalid_request", "The request must be sent as multipart/form-data."
            )
        fields: dict[str, str] = {}
        upload: tuple[str, bytes] | None = None
        head = f"Content-Type: {content_type}\r\n\r\n".encode("latin-1")
        message = BytesParser(policy=policy.HTTP).parsebytes(head + request.body)
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            data = part.get_payload(decode=True)
            if not isinstance(name, str) or not isinstance(data, bytes):
                continue
            filename = part.get_filename()
            if name == "file" and filename is not None:
                upload = (filename, data)
            else:
                fields[name] = data.decode("utf-8", "replace")
        purpose = fields.get("purpose")
        if purpose is None:
            return self.api.error(
                "invalid_request", "Missing required parameter: 'purpose'.", param="purpose"
            )
        if purpose not in PURPOSES:
            listed = ", ".join(f"'{known}'" for known in PURPOSES)
            return self.api.error(
                "invalid_request",
                f"'{purpose}' is not one of [{listed}] - 'purpose'",
                param="purpose",
            )
        if upload is None:
            return self.api.error(
                "invalid_request", "Missing required parameter: 'file'.", param="file"
            )
        return Reply(status=200, body=self.add(upload[0], purpose, upload[1]).as_json())
