"""The security middlewares, one concern each, in the order a request meets them:
headers every answer carries, the CSRF token, the failed-login throttle, a first body
limit, the Host check, authentication, the cross-site check, the body limit by
credentials, and the audit trail of what changed."""

from __future__ import annotations

from starlette.middleware import Middleware

from rota.web.audit import AuditLog
from rota.web.middleware.auth import AuditTrail, Auth, Authenticate
from rota.web.middleware.csrf import CsrfCheck, CsrfToken
from rota.web.middleware.headers import Refuse, SecurityHeaders
from rota.web.middleware.host import HostCheck
from rota.web.middleware.limits import BodyLimit
from rota.web.middleware.throttle import LoginThrottle
from rota.web.sessions import Sessions

__all__ = ["stack"]


def stack(
    auth: Auth,
    allowed_hosts: frozenset[str] | None,
    refused: Refuse,
    sessions: Sessions | None,
    audit: AuditLog,
    body_limit: int,
) -> list[Middleware]:
    return [
        Middleware(SecurityHeaders, refused=refused),
        Middleware(CsrfToken, refused=refused),
        Middleware(LoginThrottle, refused=refused, auth=auth),
        Middleware(BodyLimit, limit=body_limit, refused=refused),
        Middleware(HostCheck, allowed=allowed_hosts, refused=refused),
        Middleware(Authenticate, auth=auth, sessions=sessions, refused=refused),
        Middleware(CsrfCheck, auth=auth, body_limit=body_limit, refused=refused),
        Middleware(BodyLimit, limit=body_limit, refused=refused, by_auth=True),
        Middleware(AuditTrail, refused=refused, audit=audit),
    ]
