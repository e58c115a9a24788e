"""A limit on how long a request's headers may take to arrive (uvicorn has none).

uvicorn closes an *idle* keep-alive connection after `timeout_keep_alive`, but a client that
opens a connection and sends its headers one byte at a time holds it for ever. This h11
protocol closes a connection whose next request has not been read in full within
`seconds` of the connection opening (or of the previous response ending).
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.h11_impl import H11Protocol


def header_timeout_protocol(seconds: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with a header timeout of `seconds`."""

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

    return HeaderTimeoutProtocol
