"""Who may do what on the live service (contract: the ``auth`` section).

Tokens are bearer secrets. The config holds each one as its SHA-256 (``token_sha256``,
``admin_token_sha256``); a plain ``token`` / ``admin_token`` is accepted for local trials
and hashed on load, so only hashes are kept in memory. A request's token is hashed and
compared in constant time (``hmac.compare_digest``) against every known hash.

- A tenant may submit to the queues it is granted *and every queue below them*, sees and
  cancels only its own jobs, and reads the queue shares and the cluster status.
- The admin sees and cancels every job, may submit to any queue, and may change queue
  weights and add queues at run time (``PUT /v1/queues``).

Per-tenant limits (``TenantLimits``), so that no tenant can crowd out the others: at
most ``max_pending_tasks`` tasks waiting to start, and ``POST /v1/jobs`` requests at
``submit_rate`` per second on average with bursts of ``submit_burst`` (a token bucket).
``auth.limits`` sets the defaults, a tenant's own ``limits`` overrides any of them. The
admin (the operator) has none.

A tenant's ``run_as`` names the operating-system user its commands run as (in a working
directory of their own per job; ``live.node_agent``), so that tenants' commands cannot
read serve's files nor each other's, nor signal each other's processes (docs/live.md,
"Trust model"). The user must exist on the serve host and must not be root.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import pwd
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from fairshare.model.errors import FieldError
from fairshare.model.schema import ListOf, Number, Obj, Text, keys

ADMIN = "admin"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class TenantLimits:
    """What one tenant may have waiting and how fast it may submit (module docstring)."""

    #: tasks of the tenant's jobs that are pending (not started); a submission that would
    #: go over it is refused with 429 until some of them start, finish or are cancelled
    max_pending_tasks: int = 100_000
    #: ``POST /v1/jobs`` requests per second, sustained (token bucket refill rate)
    submit_rate: float = 100.0
    #: requests that may come at once after a quiet spell (token bucket size)
    submit_burst: int = 200


DEFAULT_LIMITS = TenantLimits()

# --- the config's ``auth:`` section, described once (``model.schema``): the parser below
# takes its keys from here, ``fairshare schema config`` renders it
_HASH = Text("hex sha256 of the token (printf %s \"$TOKEN\" | sha256sum)", pattern="^[0-9a-fA-F]{64}$")
_TOKEN = Text("the token itself (at least 8 characters; prefer its sha256)", min_length=8)
LIMITS = Obj("TenantLimits", {
    "max_pending_tasks": Number("most pending tasks; a submission over it gets 429", exclusive_minimum=0,
                                integer=True, default=DEFAULT_LIMITS.max_pending_tasks),
    "submit_rate": Number("POST /v1/jobs requests per second, sustained", exclusive_minimum=0,
                          default=DEFAULT_LIMITS.submit_rate),
    "submit_burst": Number("requests at once after a quiet spell", exclusive_minimum=0, integer=True,
                           default=DEFAULT_LIMITS.submit_burst),
}, "a tenant's limits (each optional)", nullable=True)
TENANT = Obj("Tenant", {
    "name": Text(f"the tenant's name ({ADMIN!r} is the admin's)", pattern=r"\S"),
    "token_sha256": _HASH,
    "token": _TOKEN,
    "queues": ListOf(Text("a queue path"), "the queues it may submit to (and everything below them)",
                     min_items=1),
    "limits": replace(LIMITS, description="its limits (default: auth.limits)"),
    "run_as": Text("the operating-system user its commands run as, in a per-job directory under serve's "
                   "--workdir (a user of the serve host other than root; serve must run as root)", pattern=r"\S"),
}, "a tenant: a token and its queues", required=("name", "queues"), exactly_one_of=("token_sha256", "token"))
AUTH = Obj("Auth", {
    "admin_token_sha256": replace(_HASH, description="the admin token's sha256 (the admin may do everything)"),
    "admin_token": replace(_TOKEN, description="the admin token itself (prefer admin_token_sha256)"),
    "tenants": ListOf(TENANT, "the tenants"),
    "limits": replace(LIMITS, description="every tenant's limits unless its own says otherwise"),
}, "who may use the service: an admin token and the tenants", at_most_one_of=("admin_token_sha256", "admin_token"))
AUTH_KEYS = keys(AUTH)
TENANT_KEYS = keys(TENANT)
LIMIT_KEYS = keys(LIMITS)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Principal:
    """The caller of one request: a tenant (with its granted queue paths) or the admin."""

    name: str
    admin: bool = False
    queues: tuple[str, ...] = ()

    def may_use_queue(self, path: str) -> bool:
        """Granted ``ads`` covers ``ads`` and ``ads.prod``, not ``adsx``."""
        if self.admin:
            return True
        return any(path == g or path.startswith(g + ".") for g in self.queues)

    def sees_tenant(self, tenant: str) -> bool:
        return self.admin or tenant == self.name


class SubmitRateLimiter:
    """A token bucket per tenant (``TenantLimits.submit_rate``, ``submit_burst``): a
    request takes a token; a tenant without one is told how long until it has one. The
    clock is given (``now``, seconds, monotonic), so the arithmetic is testable."""

    def __init__(self) -> None:
        self._buckets: dict[str, tuple[float, float]] = {}  # tenant -> (tokens, at)
        self._lock = threading.Lock()

    def take(self, tenant: str, limits: TenantLimits, now: float) -> float:
        """0 when the request may go ahead (a token taken), else seconds until a token."""
        with self._lock:
            tokens, at = self._buckets.get(tenant, (float(limits.submit_burst), now))
            tokens = min(float(limits.submit_burst), tokens + max(0.0, now - at) * limits.submit_rate)
            if tokens >= 1.0:
                self._buckets[tenant] = (tokens - 1.0, now)
                return 0.0
            self._buckets[tenant] = (tokens, now)
            return (1.0 - tokens) / limits.submit_rate


class AuthError(Exception):
    """401: no token, or a token nobody holds."""


@dataclass(frozen=True)
class AuthConfig:
    admin_hash: str | None
    tenants: tuple[tuple[str, str, tuple[str, ...]], ...]  # (name, token hash, granted queues)
    limits: Mapping[str, TenantLimits] = field(default_factory=dict)  # tenant name -> its limits
    #: tenant name -> the operating-system user its commands run as (tenants without
    #: ``run_as`` are absent: their commands run as the user that runs serve)
    run_as: Mapping[str, str] = field(default_factory=dict)

    def limits_of(self, tenant: str) -> TenantLimits | None:
        """The tenant's limits; ``None`` for the admin (unlimited)."""
        if tenant == ADMIN:
            return None
        return self.limits.get(tenant, DEFAULT_LIMITS)

    def authenticate(self, token: str | None) -> Principal:
        if not token:
            raise AuthError("missing bearer token (send 'Authorization: Bearer TOKEN')")
        digest = token_hash(token)
        # compare against every hash, so the time taken does not tell which one matched
        found: Principal | None = None
        if self.admin_hash is not None and hmac.compare_digest(digest, self.admin_hash):
            found = Principal(ADMIN, admin=True)
        for name, h, queues in self.tenants:
            if hmac.compare_digest(digest, h) and found is None:
                found = Principal(name, queues=queues)
        if found is None:
            raise AuthError("unknown token")
        return found


def parse_auth(raw: Any, queue_paths: set[str], errors: list[FieldError]) -> AuthConfig:
    """Validate the config's ``auth`` section; problems are appended to ``errors``."""
    if raw is None:
        errors.append(FieldError("auth", "is required (an admin token hash and the tenants)"))
        return AuthConfig(None, ())
    if not isinstance(raw, Mapping):
        errors.append(FieldError("auth", "must be a mapping with admin_token_sha256 and tenants"))
        return AuthConfig(None, ())
    problems_before = len(errors)
    for key in raw:
        if key not in AUTH_KEYS:
            errors.append(FieldError(f"auth.{key}", f"unknown key (allowed: {', '.join(sorted(AUTH_KEYS))})"))
    admin_hash = _hash_or_token(raw, "admin_token_sha256", "admin_token", "auth", errors, required=False)
    defaults = _parse_limits(raw.get("limits"), DEFAULT_LIMITS, "auth.limits", errors)
    tenants_raw = raw.get("tenants", [])
    tenants: list[tuple[str, str, tuple[str, ...]]] = []
    limits: dict[str, TenantLimits] = {}
    run_as: dict[str, str] = {}
    if not isinstance(tenants_raw, list):
        errors.append(FieldError("auth.tenants", "must be a list of tenants"))
        tenants_raw = []
    names: set[str] = set()
    hashes: dict[str, str] = {} if admin_hash is None else {admin_hash: "the admin"}
    for i, t in enumerate(tenants_raw):
        p = f"auth.tenants[{i}]"
        if not isinstance(t, Mapping):
            errors.append(FieldError(p, "must be a mapping with name, token_sha256 and queues"))
            continue
        for key in t:
            if key not in TENANT_KEYS:
                errors.append(FieldError(f"{p}.{key}", f"unknown key (allowed: {', '.join(sorted(TENANT_KEYS))})"))
        name = t.get("name")
        if not isinstance(name, str) or not name.strip():
            errors.append(FieldError(f"{p}.name", "must be a non-empty string"))
            name = f"tenant{i}"
        elif name == ADMIN:
            errors.append(FieldError(f"{p}.name", f"{ADMIN!r} is reserved for the admin token"))
        elif name in names:
            errors.append(FieldError(f"{p}.name", f"duplicate tenant {name!r}"))
        names.add(name)
        h = _hash_or_token(t, "token_sha256", "token", p, errors, required=True)
        if h is not None:
            if h in hashes:
                errors.append(FieldError(f"{p}.token_sha256", f"the same token as {hashes[h]}: tokens must differ"))
            hashes[h] = f"tenant {name!r}"
        queues = t.get("queues")
        granted: list[str] = []
        if not isinstance(queues, list) or not queues:
            errors.append(FieldError(f"{p}.queues", "must be a non-empty list of queue paths"))
        else:
            for k, q in enumerate(queues):
                if not isinstance(q, str) or q not in queue_paths:
                    known = ", ".join(sorted(queue_paths)) or "none defined"
                    errors.append(FieldError(f"{p}.queues[{k}]", f"unknown queue {q!r} (queues: {known})"))
                else:
                    granted.append(q)
        limits[name] = _parse_limits(t.get("limits"), defaults, f"{p}.limits", errors)
        if "run_as" in t:
            user = _parse_run_as(t["run_as"], name, f"{p}.run_as", errors)
            if user is not None:
                run_as[name] = user
        if h is not None:
            tenants.append((name, h, tuple(granted)))
    # (only when nothing else was wrong: a bad admin token or tenant is the problem to
    # fix, and the service would have had a user without it)
    if admin_hash is None and not tenants and len(errors) == problems_before:
        errors.append(FieldError("auth", "no admin token and no tenants: nobody could use the service"))
    return AuthConfig(admin_hash, tuple(tenants), limits, run_as)


def _parse_run_as(raw: Any, tenant: str, path: str, errors: list[FieldError]) -> str | None:
    """A tenant's ``run_as``: a user of this host other than root (root would isolate
    nothing: its commands could read and signal everything)."""
    if not isinstance(raw, str) or not raw.strip():
        errors.append(FieldError(path, f"must be the name of an operating-system user, got {raw!r}"))
        return None
    try:
        entry = pwd.getpwnam(raw)
    except KeyError:
        errors.append(FieldError(path, f"no user {raw!r} on this host (tenant {tenant!r}'s commands would run as it)"))
        return None
    if entry.pw_uid == 0:
        errors.append(FieldError(path, f"{raw!r} is root (uid 0): its commands could read serve's database and "
                                       "signal every process; name an unprivileged user"))
        return None
    return raw


def _parse_limits(raw: Any, base: TenantLimits, path: str, errors: list[FieldError]) -> TenantLimits:
    """``{max_pending_tasks, submit_rate, submit_burst}``, each optional (``base`` fills in)."""
    if raw is None:
        return base
    if not isinstance(raw, Mapping):
        errors.append(FieldError(path, f"must be a mapping with any of {', '.join(sorted(LIMIT_KEYS))}"))
        return base
    values: dict[str, Any] = {}
    for key, value in raw.items():
        p = f"{path}.{key}"
        if key not in LIMIT_KEYS:
            errors.append(FieldError(p, f"unknown key (allowed: {', '.join(sorted(LIMIT_KEYS))})"))
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or value <= 0:
            errors.append(FieldError(p, f"must be a positive number, got {value!r}"))
        elif key != "submit_rate" and value != int(value):
            errors.append(FieldError(p, f"must be a whole number, got {value!r}"))
        else:
            values[key] = float(value) if key == "submit_rate" else int(value)
    return replace(base, **values)


def _hash_or_token(raw: Mapping, hash_key: str, token_key: str, path: str, errors: list[FieldError], *,
                   required: bool) -> str | None:
    if hash_key in raw and token_key in raw:
        errors.append(FieldError(f"{path}.{token_key}", f"give {hash_key} or {token_key}, not both"))
        return None
    if hash_key in raw:
        value = raw[hash_key]
        if not isinstance(value, str) or not _HEX64.match(value.lower()):
            errors.append(FieldError(f"{path}.{hash_key}", "must be 64 hex digits (sha256 of the token)"))
            return None
        return value.lower()
    if token_key in raw:
        value = raw[token_key]
        if not isinstance(value, str) or len(value) < 8:
            errors.append(FieldError(f"{path}.{token_key}", "must be a string of at least 8 characters"))
            return None
        return token_hash(value)
    if required:
        errors.append(FieldError(f"{path}.{hash_key}", "is required (sha256 of the token)"))
    return None
