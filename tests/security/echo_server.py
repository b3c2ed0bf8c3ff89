"""A provider-shaped server that answers every request 401 and echoes the credentials it was
sent (key headers, a `key` query parameter, Basic auth from a URL's user info, as sent and
decoded) in each vendor's own error body: what a careless or hostile endpoint does with a key.
"""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit


class _EchoHandler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        echoed = " ".join(self._credentials())
        if "x-api-key" in self.headers or "anthropic" in self.path:
            body: dict[str, Any] = {
                "type": "error",
                "error": {"type": "authentication_error", "message": f"invalid key: {echoed}"},
            }
        elif ":streamGenerateContent" in self.path or ":generateContent" in self.path:
            body = {
                "error": {
                    "code": 401,
                    "message": f"API key not valid: {echoed}",
                    "status": "UNAUTHENTICATED",
                }
            }
        else:
            body = {
                "error": {
                    "message": f"Incorrect API key provided: {echoed}",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            }
        payload = json.dumps(body).encode()
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _credentials(self) -> list[str]:
        found = [self.headers.get(name, "") for name in ("x-api-key", "x-goog-api-key")]
        authorization = self.headers.get("authorization", "")
        scheme, _, value = authorization.partition(" ")
        found.append(authorization)
        if scheme.lower() == "basic":
            found.append(base64.b64decode(value).decode("utf-8", errors="replace"))
        found.extend(parse_qs(urlsplit(self.path).query).get("key", []))
        found.append(f"path={self.path}")
        return [item for item in found if item]

    def log_message(self, format: str, *args: Any) -> None:
        return


class EchoServer:
    """`with EchoServer() as server:` serves on 127.0.0.1 until the block ends."""

    def __init__(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def __enter__(self) -> EchoServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
