"""The web UI and JSON API (Starlette): ``rota web`` serves it, ``rota demo`` too.

It reads and changes Redis through :class:`rota.client.Client` only; nothing here
imports the worker package.
"""

from rota.web.app import create_app
from rota.web.middleware.auth import Auth

__all__ = ["Auth", "create_app"]
