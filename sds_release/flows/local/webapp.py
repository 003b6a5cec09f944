"""The web application a home's Prefect server runs: Prefect's (API and UI), with a Content
Security Policy that keeps every page it serves from making a request outside the machine.

Prefect's UI (3.9's default "V2" UI) starts an analytics SDK on every page, whatever
``PREFECT_SERVER_ANALYTICS_ENABLED`` says (that setting only gates the events it sends): the SDK
fetches its remote configuration from ``sr-client-cfg.amplitude.com`` at once, even on the
login page, and no Prefect setting or ``/ui-settings`` field turns that off. The browser refuses
any request the page's policy does not allow, so the policy below (``connect-src 'self'`` and
``default-src 'self'``) stops it, and anything like it, in the custodian's browser. The
supervisor (:mod:`sds_release.flows.local.supervisor`) starts uvicorn with :func:`create_app`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["CONTENT_SECURITY_POLICY", "create_app", "with_policy"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",  # anything not named below: this server only
        "connect-src 'self'",  # fetch, XHR, beacons, WebSockets: the API of this server only
        "script-src 'self' 'unsafe-eval'",  # the UIs' bundles; their form validators compile
        "style-src 'self' 'unsafe-inline'",  # the UIs set inline styles
        "img-src 'self' data: blob:",
        "font-src 'self' data:",
        "worker-src 'self' blob:",  # the run graph draws in a worker made from a blob
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
    ]
)
"""Every response's ``Content-Security-Policy``: scripts, styles, images, fonts, workers and
every connection of a page come from this server (or from the page itself: ``data:``,
``blob:``); ``'unsafe-eval'`` and inline styles make no request. Links a user clicks (Prefect's
documentation) still open: navigation is not a request of the page."""
_HEADER = b"content-security-policy"


def with_policy(app: App, policy: str = CONTENT_SECURITY_POLICY) -> App:
    """``app`` (an ASGI application) with ``policy`` as the ``Content-Security-Policy`` of every
    HTTP response (one it set itself is replaced); lifespan and WebSocket traffic unchanged."""
    value = policy.encode("ascii")

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return

        async def send_with_policy(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != _HEADER]
                message = {**message, "headers": [*headers, (_HEADER, value)]}
            await send(message)

        await app(scope, receive, send_with_policy)

    return guarded


def create_app() -> App:
    """Prefect's server application (as ``prefect server start`` serves it) behind
    :data:`CONTENT_SECURITY_POLICY`: uvicorn's ``--factory``."""
    from prefect.server.api.server import create_app as prefect_app

    from sds_release.flows.console import freeze_heap_at_exit

    freeze_heap_at_exit()
    return with_policy(prefect_app())
