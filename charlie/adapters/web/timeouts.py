"""Limits on how long a request's headers and body may take to arrive (uvicorn has none).

uvicorn closes an *idle* keep-alive connection after `timeout_keep_alive`, but a client that
opens a connection and sends its headers (or its body) one byte at a time holds it, and a
file descriptor, for ever: enough of them lock everyone out. This h11 protocol closes a
connection whose next request's headers have not arrived within `seconds` of the connection
opening (or of the previous response ending), and one whose body is still incomplete
`body_seconds` after that.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.h11_impl import H11Protocol


def header_timeout_protocol(seconds: float, body_seconds: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with a header timeout of `seconds` and a body timeout."""

    class HeaderTimeoutProtocol(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm_header_timer()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm_header_timer()

        def _arm_header_timer(self) -> None:
            self.loop.call_later(seconds, self._headers_late, self.cycle)

        def _headers_late(self, waiting_since: object) -> None:
            if self.transport.is_closing() or self.transport.get_protocol() is not self:
                return  # closed, or upgraded to a WebSocket
            if self.cycle is waiting_since:  # no new request's headers arrived in time
                self.transport.close()
            elif self.cycle is not None and self.cycle.more_body:
                self.loop.call_later(body_seconds, self._body_late, self.cycle)

        def _body_late(self, cycle: object) -> None:
            if self.transport.is_closing() or self.transport.get_protocol() is not self:
                return
            if self.cycle is cycle and self.cycle.more_body:  # the body never finished
                self.transport.close()

    return HeaderTimeoutProtocol
