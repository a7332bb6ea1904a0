"""The web dashboard of ``fairshare serve``: ``GET /`` and its two static files.

The page (``static/index.html``, ``dashboard.js``, ``dashboard.css``: plain HTML, CSS and
JavaScript, no build step, nothing loaded from outside the server) asks for a token,
keeps it in the tab's ``sessionStorage`` and polls ``/v1/status``, ``/v1/history`` and
one page of ``/v1/jobs`` (the 200 newest) with it, and for an open job with tasks not
started ``/v1/jobs/{id}/explain`` (the "Why it waits" panel). It shows only what the API
says, so it needs no route of its own beyond the files, and serving them needs no token:
the page holds no data until the user's token fetches some.

The files are read once, when the routes are installed, so a missing package-data file
fails at start-up rather than on the first visit.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

#: URL prefix of the dashboard's static files (the page itself is at ``/``).
STATIC_PREFIX = "/dashboard"

# name -> media type; the only files served (no directory listing, no path parameters).
_STATIC_FILES = {
    "dashboard.js": "text/javascript; charset=utf-8",
    "dashboard.css": "text/css; charset=utf-8",
}

# The page runs only its own script and style from this server and talks only to this
# server; 'data:' for the empty favicon. Element.style changes made by the script are
# CSSOM calls, which style-src does not restrict.
_SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # The files change with the package version; a reload after an upgrade must not
    # mix an old script with a new page.
    "Cache-Control": "no-cache",
}


def read_static(name: str) -> str:
    """The text of one file of ``fairshare/live/static`` (package data)."""
    return resources.files("fairshare.live").joinpath("static", name).read_text(encoding="utf-8")


def install(app: Any, service: Any) -> None:
    """Add ``GET /`` (the page) and ``GET /dashboard/{file}`` to the FastAPI ``app``.

    ``service`` is not used by the routes (the page reads the public API); it is taken
    so every observability module installs the same way.
    """
    from fastapi.responses import HTMLResponse, Response

    del service  # the page reads the API, not the service object
    page = read_static("index.html")
    files = {name: (read_static(name), media_type) for name, media_type in _STATIC_FILES.items()}

    @app.get("/", include_in_schema=False, response_class=HTMLResponse)
    def dashboard_page() -> HTMLResponse:
        return HTMLResponse(page, headers=_SECURITY_HEADERS)

    for name, (text, media_type) in files.items():
        _add_file_route(app, f"{STATIC_PREFIX}/{name}", text, media_type, Response)


def _add_file_route(app: Any, path: str, text: str, media_type: str, response_class: Any) -> None:
    # One function per file (not a loop variable captured late): each route returns its own text.
    def serve_file() -> Any:
        return response_class(content=text, media_type=media_type, headers=_SECURITY_HEADERS)

    app.add_api_route(path, serve_file, methods=["GET"], include_in_schema=False, name=f"dashboard:{path}")
