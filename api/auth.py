"""Bearer tokens: who is asking (the audit's actor) and what they may do (read < operate).

Tokens come from `--tokens FILE` or `SWARMKIT_TOKENS`, one per line as
`name scope token`, or JSON (a list of `{name, scope, token}`). Compared in
constant time against every configured token, so neither a match's position
nor a near miss shows in the timing.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

READ, OPERATE = "read", "operate"
_RANK = {READ: 0, OPERATE: 1}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:+-]{0,63}$")
MIN_TOKEN = 16  # shorter secrets are guessable over a network


class TokenError(ValueError):
    """A token file or variable that cannot be used: refused at start-up, never half-read."""


@dataclass(frozen=True)
class Token:
    name: str
    scope: str
    digest: bytes  # sha256 of the secret: equal lengths for compare_digest, no secret kept in memory


def _entry(name: object, scope: object, secret: object, where: str) -> Token:
    if not isinstance(name, str) or not _NAME.match(name):
        raise TokenError(f"{where}: token name {name!r} must be 1-64 letters, digits or ._@:+-")
    if scope not in _RANK:
        raise TokenError(f"{where}: token {name!r} has scope {scope!r}; use read or operate")
    if not isinstance(secret, str) or len(secret) < MIN_TOKEN or any(ch.isspace() for ch in secret):
        raise TokenError(f"{where}: token {name!r} must be at least {MIN_TOKEN} characters with no spaces")
    return Token(name, str(scope), hashlib.sha256(secret.encode()).digest())


def parse_tokens(text: str, where: str) -> list[Token]:
    text = text.strip()
    if not text:
        return []
    out: list[Token] = []
    if text[0] in "[{":
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise TokenError(f"{where}: not valid JSON ({exc})") from None
        items = data.get("tokens") if isinstance(data, dict) else data
        if not isinstance(items, list):
            raise TokenError(f"{where}: expected a list of {{name, scope, token}}")
        for i, item in enumerate(items, 1):
            if not isinstance(item, dict):
                raise TokenError(f"{where}: entry {i} is not an object")
            out.append(_entry(item.get("name"), item.get("scope"), item.get("token"), f"{where} entry {i}"))
    else:
        for n, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) != 3:
                raise TokenError(f"{where} line {n}: expected `name scope token`")
            out.append(_entry(parts[0], parts[1], parts[2], f"{where} line {n}"))
    names = [t.name for t in out]
    if len(set(names)) != len(names):
        raise TokenError(f"{where}: a token name is given twice")
    return out


def load_tokens(path: str | None) -> list[Token]:
    """The file's tokens, else SWARMKIT_TOKENS's; none configured is an empty list."""
    if path:
        try:
            return parse_tokens(Path(path).read_text(encoding="utf-8"), path)
        except OSError as exc:
            raise TokenError(f"{path}: cannot read the token file ({exc.strerror or exc})") from None
    return parse_tokens(os.environ.get("SWARMKIT_TOKENS", ""), "SWARMKIT_TOKENS")


class Denied(Exception):
    def __init__(self, code: int, detail: str):
        super().__init__(detail)
        self.code = code
        self.detail = detail


class Auth:
    def __init__(self, tokens: list[Token], anonymous_actor: str):
        self.tokens = tokens
        # With no tokens configured the server listens on loopback only, and acts
        # are recorded as the serving user, as the CLI records them on that machine.
        self.anonymous_actor = anonymous_actor

    @property
    def enabled(self) -> bool:
        return bool(self.tokens)

    def check(self, header: str | None, need: str) -> str:
        """The actor for a request that needs scope `need`, or Denied (401, 403)."""
        if not self.tokens:
            return self.anonymous_actor
        scheme, _, secret = (header or "").partition(" ")
        if scheme.lower() != "bearer" or not secret.strip():
            raise Denied(401, "a bearer token is required: send `Authorization: Bearer TOKEN`")
        digest = hashlib.sha256(secret.strip().encode()).digest()
        found: Token | None = None
        for token in self.tokens:  # every token, always: no early exit to time
            if hmac.compare_digest(token.digest, digest):
                found = token
        if found is None:
            raise Denied(401, "the bearer token is not one this server knows")
        if _RANK[found.scope] < _RANK[need]:
            raise Denied(403, f"token {found.name!r} has scope {found.scope}; this needs {need}")
        return found.name
