"""One way to redact anything before it is written anywhere (docs/architecture.md).

:func:`redact` returns a redacted copy of a pydantic model or any JSON-like value:

* ``SecretStr`` values (they serialize as ``***`` already);
* values under secret-like keys (``api_key``, ``password``, ``secret``, ``token``,
  ``authorization``, ``connection_string``, ``x-api-key``, ``aws_secret_access_key`` ...);
* every value of a tool's ``env`` and ``headers`` maps;
* credentials in URLs (``https://user:pass@host`` → ``https://user:***@host``, a bare
  ``https://token@host`` → ``https://***@host``) and credential-like query parameters
  (``?api-key=…``, ``&sig=…``, ``access_token``, ``key``, ``X-Amz-Signature`` ...);
* ``--api-key=…`` / ``--token …`` style argv and ``Bearer …`` tokens;
* and, anywhere in any string, the value of each registered secret: a ``${VAR}`` that the
  loader substituted into a secret field or whose name looks secret, a literal value of a
  secret field, a credential found in a config URL (at least 8 characters), and any run of
  key-like characters (not only letters) that one starts with: providers echo
  ``sk-abc123…wxyz``.
"""

from __future__ import annotations

import base64
import itertools
import json
import logging
import re
import threading
import traceback
from collections.abc import Iterable
from functools import lru_cache
from typing import Any, TypeVar, overload
from urllib.parse import quote, quote_plus

from pydantic import BaseModel, SecretStr, ValidationError

from holodeck_core.defaults import REDACTION_KEYS_KEPT

REDACTED = "***"
"""What a secret becomes wherever it would be written or shown."""
MIN_SECRET_LENGTH = 8
PLACEHOLDER = "redacted"
"""What stands for a secret where ``***`` would break a field's constraint."""
_SECRET_KEY = re.compile(
    r"(^|_)(api_?key|apikey|password|passwd|pwd|secret|secret_key|private_key|access_key|"
    r"token|auth_token|access_token|refresh_token|authorization|connection_string|"
    r"credentials?|cookie|x_api_key|subscription_key)(_id|_value)?$"
)
_SECRET_VAR_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
SECRET_MAPS = frozenset({"env", "headers"})

# A value ends at a quote, a backtick or a closing bracket too: Markdown and the console wrap
# URLs and commands in them (`https://h/?key=…`, (https://…)), and they must survive.
# Every pattern below runs in time linear in its input: a match may only *start* where the
# previous character cannot belong to it (a negative lookbehind), and runs of a character
# class are consumed possessively (``*+``), so no position is rescanned by a later start.
_URL_USERINFO = re.compile(
    r"(?<![a-zA-Z0-9+.-])(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*+://)"
    r"(?P<user>[^:/@\s?#]*+)(?::(?P<password>[^@/\s?#]++))?@"
)
_QUERY_PARAM = re.compile(r"(?<=[?&;])(?P<name>[A-Za-z0-9_.-]++)=(?P<value>[^&#\s\"'<>`)\]]++)")
_QUERY_SECRET_NAMES = frozenset(
    {"key", "sig", "signature", "code", "auth", "pass", "apikey", "api_key", "access_token"}
)
_ARGV_SECRET = re.compile(
    r"(?<![A-Za-z0-9_-])(?P<flag>--?(?=[A-Za-z0-9_-]*?(?:api[_-]?key|token|password|secret))"
    r"[A-Za-z0-9_-]*+)(?P<sep>=|\s++)(?P<value>[^\s\"'`)\]]++)",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?P<prefix>\bBearer\s++)[A-Za-z0-9._~+/=-]{8,}+", re.IGNORECASE)
_PATTERN_TRACES = (
    r"://[^/\s?#@]*@",  # _URL_USERINFO
    r"[?&;][A-Za-z0-9_.-]+=",  # _QUERY_PARAM
    r"(?i:api[_-]?key|token|password|secret)",  # _ARGV_SECRET
    r"(?i:bearer\s)",  # _BEARER
)
"""Without one of these a text holds nothing the patterns above match."""
_TOKEN = re.compile(rf"(?<![A-Za-z0-9_+/-])[A-Za-z0-9_+/-]{{{MIN_SECRET_LENGTH},}}+")
"""A run of key-like characters: a provider that echoes part of a key (``sk-abc123…wxyz``)
echoes such a run, which is redacted when a registered secret starts with it."""

_registered: set[str] = set()
_lock = threading.Lock()


@lru_cache(maxsize=4096)  # a run's dicts repeat the same few hundred keys
def is_secret_key(name: str) -> bool:
    """Whether a field or map key names a secret: it must *end* with a secret word, so
    ``api_key`` and ``aws_access_key_id`` are secret, ``token_usage`` and ``max_tokens`` not."""
    normalized = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    return bool(_SECRET_KEY.search(normalized))


def is_secret_var(name: str) -> bool:
    """Whether an environment variable's name looks secret (``*KEY*``, ``*TOKEN*``...)."""
    return bool(_SECRET_VAR_NAME.search(name))


def is_secret_query_param(name: str) -> bool:
    """``api-key``, ``token``, ``sig``, ``access_token``, ``X-Amz-Signature``, ``key``..."""
    normalized = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    last = normalized.rsplit("_", 1)[-1]
    return (
        is_secret_key(normalized)
        or normalized in _QUERY_SECRET_NAMES
        or last in {"signature", "sig", "credential", "key"}
    )


def register_secret(value: str) -> None:
    """Scrub ``value`` from everything redacted in this process from now on, and from every
    log record (ours and third parties': the ``mcp`` SDK logs a server's stray stdout)."""
    if len(value) >= MIN_SECRET_LENGTH:
        with _lock:
            _registered.add(value)
            if not _log_records_scrubbed:
                _scrub_log_records()


_log_records_scrubbed: list[bool] = []


def _scrub_log_records() -> None:
    """Wrap the log record factory: a record's message (and traceback) is scrubbed as it is
    made, whichever logger and handler it then goes to."""
    _log_records_scrubbed.append(True)
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: the handler reports it
            return record
        scrubber = _scrubber()
        record.msg, record.args = scrubber.scrub(message), ()
        if record.exc_info and not record.exc_text:
            record.exc_text = scrubber.scrub("".join(traceback.format_exception(*record.exc_info)))
        return record

    logging.setLogRecordFactory(factory)


def _scrubber(secrets: Iterable[str] = ()) -> _Scrubber:
    """The scrubber of ``secrets`` and every registered one."""
    return _scrubber_for(registered_secrets() | frozenset(secrets))


@lru_cache(maxsize=8)
def _scrubber_for(secrets: frozenset[str]) -> _Scrubber:
    """One scrubber per set of secrets, kept: a run redacts each case it journals and checks
    each result, and the map keys it has scrubbed (the same few hundred) are remembered."""
    return _Scrubber(secrets)


def registered_secrets() -> frozenset[str]:
    with _lock:
        return frozenset(_registered)


@lru_cache(maxsize=1024)
def encodings(secret: str) -> frozenset[str]:
    """The forms a secret comes back in (docs/agent-yaml.md): raw, JSON-escaped (ASCII-only or not:
    a server echoes ``"`` as ``\\"`` and ``é`` as ``\\u00e9``), URL-encoded and base64."""
    forms = {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        quote(secret, safe=""),
        quote_plus(secret),
        base64.b64encode(secret.encode()).decode(),
        base64.b64encode(secret.encode()).decode().rstrip("="),
    }
    return frozenset(form for form in forms if len(form) >= MIN_SECRET_LENGTH)


def basic_auth(user: str, password: str) -> str:
    """What an ``Authorization: Basic`` header carries for ``user:password``."""
    return base64.b64encode(f"{user}:{password}".encode()).decode()


def secrets_in_text(text: str) -> set[str]:
    """The credentials a config string carries in plain sight: URL passwords and userinfo,
    credential-like query parameters, ``--token x`` argv values and bearer tokens. The
    loader registers them, so an error or reply that echoes one is scrubbed too."""
    found: set[str] = set()
    for match in _URL_USERINFO.finditer(text):
        found.add(match["password"] or match["user"])
        if match["password"]:
            found.add(basic_auth(match["user"], match["password"]))
    for match in _QUERY_PARAM.finditer(text):
        if is_secret_query_param(match["name"]):
            found.add(match["value"])
    found.update(match["value"] for match in _ARGV_SECRET.finditer(text))
    found.update(match[0][len(match["prefix"]) :] for match in _BEARER.finditer(text))
    return {value for value in found if len(value) >= MIN_SECRET_LENGTH}


class _Scrubber:
    """A set of secrets, gathered and sorted (longest first) once for every string it
    scrubs: a run's EvalRun holds tens of thousands of strings."""

    __slots__ = ("heads", "keys", "longest", "might_change", "values")

    def __init__(self, secrets: frozenset[str]) -> None:
        self.values, self.heads = _secret_forms(secrets)
        self.longest = len(self.values[0]) if self.values else 0
        self.keys: dict[str, str] = {}  # map keys repeat: each is scrubbed once
        # What :meth:`scrub` needs to find in a text before it can change it: a secret's head
        # (a secret, or a piece of one, starts with it) or what each pattern cannot match
        # without (a URL's userinfo, a query parameter, a secret-named flag, a bearer token)
        self.might_change = re.compile(
            "|".join([*(re.escape(head) for head in sorted(self.heads)), *_PATTERN_TRACES])
        )

    def key(self, key: str) -> str:
        """A map key (a case id keys the fingerprints), scrubbed like any text."""
        scrubbed = self.keys.get(key)
        if scrubbed is None:
            if len(self.keys) >= REDACTION_KEYS_KEPT:  # a long-lived process's many case ids
                self.keys.clear()
            scrubbed = self.keys[key] = self.scrub(key)
        return scrubbed

    def scrub(self, text: str) -> str:
        if self.might_change.search(text) is None:  # most of a run's texts: one scan
            return text
        for value in self.values:
            if value in text:
                text = text.replace(value, REDACTED)
        # each pattern needs its literal character: skip the scan of a text without it
        if "@" in text:
            text = _URL_USERINFO.sub(_userinfo, text)
        if "=" in text:
            text = _QUERY_PARAM.sub(_query_param, text)
        if "-" in text:
            text = _ARGV_SECRET.sub(lambda m: f"{m['flag']}{m['sep']}{REDACTED}", text)
        text = _BEARER.sub(lambda m: f"{m['prefix']}{REDACTED}", text)
        # a token _piece redacts starts a secret and is MIN_SECRET_LENGTH long at least, so
        # the text holds that secret's head: without one, no token needs looking at
        if any(head in text for head in self.heads):
            text = _TOKEN.sub(self._piece, text)
        return text

    def _piece(self, match: re.Match[str]) -> str:
        # Providers echo a key's first characters (``sk-abc12…wxyz``); a plain word that
        # happens to start a secret (``password`` of ``password123``) is left alone.
        token = match[0]
        if (
            len(token) < self.longest
            and not token.isalpha()
            and any(value.startswith(token) for value in self.values)
        ):
            return REDACTED
        return token

    def argv(self, argv: list[str]) -> list[str]:
        """``--api-key=x`` and ``--api-key x`` both lose their value; other args are
        scrubbed."""
        out: list[str] = []
        hide_next = False
        for arg in argv:
            if hide_next:
                out.append(REDACTED)
                hide_next = False
                continue
            flag = arg.split("=", 1)[0]
            if arg.startswith("-") and is_secret_key(flag.lstrip("-")):
                if "=" in arg:
                    out.append(f"{self.scrub(flag)}={REDACTED}")
                else:
                    out.append(self.scrub(arg))
                    hide_next = True
                continue
            out.append(self.scrub(arg))
        return out


@lru_cache(maxsize=64)
def _secret_forms(secrets: frozenset[str]) -> tuple[tuple[str, ...], frozenset[str]]:
    """Every form of ``secrets`` (:func:`encodings`), longest first, and their first
    :data:`MIN_SECRET_LENGTH` characters: worked out once per set of secrets, not once per
    redaction (a run redacts every case it journals)."""
    values = sorted(
        {encoded for v in secrets if len(v) >= MIN_SECRET_LENGTH for encoded in encodings(v)},
        key=len,
        reverse=True,
    )
    return tuple(values), frozenset(v[:MIN_SECRET_LENGTH] for v in values)


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """Scrub secret values, pieces of them and credential patterns from free text (logs,
    messages, argv). Linear in ``len(text)`` for a given set of secrets."""
    return _scrubber(secrets).scrub(text)


def _userinfo(match: re.Match[str]) -> str:
    """``https://user:pw@`` → ``https://user:***@``; a bare ``https://token@`` → ``***@``."""
    if match["password"] is None:
        return f"{match['scheme']}{REDACTED}@" if match["user"] else match[0]
    return f"{match['scheme']}{match['user']}:{REDACTED}@"


def _query_param(match: re.Match[str]) -> str:
    if not is_secret_query_param(match["name"]) or match["value"] == REDACTED:
        return match[0]
    return f"{match['name']}={REDACTED}"


def redact_argv(argv: list[str]) -> list[str]:
    """``--api-key=x`` and ``--api-key x`` both lose their value; other args are scrubbed."""
    return _scrubber().argv(argv)


M = TypeVar("M", bound=BaseModel)


@overload
def redact(value: M, secrets: Iterable[str] = ()) -> M: ...
@overload
def redact(value: Any, secrets: Iterable[str] = ()) -> Any: ...
def redact(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A redacted copy of ``value`` (a model comes back as the same model type, valid: see
    :func:`_validated`), or ``value`` itself when nothing in it needed redacting: the walk
    copies only what it changes, and a model is validated again only when its dump changed
    (most of a run's EvalRun and journal lines hold no secret; docs/benchmarks.md)."""
    scrubber = _scrubber(secrets)
    if isinstance(value, BaseModel):
        dumped = value.model_dump(mode="json")
        data = _walk(dumped, scrubber, key=None)
        return value if data is dumped else _validated(type(value), data)
    return _walk(value, scrubber, key=None)


def changes_nothing(
    value: BaseModel, secrets: Iterable[str] = (), exclude: set[str] | None = None
) -> bool:
    """Whether :func:`redact` leaves ``value`` (but for its fields ``exclude``) as it is."""
    dumped = value.model_dump(mode="json", exclude=exclude)
    return _walk(dumped, _scrubber(secrets), key=None) is dumped


class CheckedAhead:
    """Models checked one by one while a run waits on the model (each case's result as it
    finishes): those that hold nothing to redact need no walk when the run is redacted as a
    whole at the end, unless a secret was registered since (docs/benchmarks.md)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = frozenset(secrets)
        self._clean: dict[int, tuple[BaseModel, frozenset[str]]] = {}

    def check(self, value: BaseModel) -> None:
        registered = registered_secrets()
        if changes_nothing(value, self.secrets):
            self._clean[id(value)] = (value, registered)  # kept alive: no other has its id

    def all_clean(self, values: Iterable[BaseModel]) -> bool:
        """Whether every one of ``values`` was checked, clean, under today's secrets."""
        registered = registered_secrets()
        return all(self._is_clean(value, registered) for value in values)

    def _is_clean(self, value: BaseModel, registered: frozenset[str]) -> bool:
        clean = self._clean.get(id(value))
        return clean is not None and clean[0] is value and clean[1] == registered


def _validated(model: type[M], data: Any) -> M:
    """``model`` validated from redacted ``data``. Redaction must never make a valid document
    invalid (docs/agent-yaml.md): where ``***`` breaks a constraint (a case id's pattern, a regular
    expression, a tool name), the strings at the failing spot get :data:`PLACEHOLDER` in its
    place, which fits an id, a name and a pattern alike. An error with no ``***`` to soften was
    there before redaction and is raised."""
    while True:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            holder = [data]
            if not any(_soften_at(holder, error["loc"]) for error in exc.errors()):
                raise
            data = holder[0]


def _soften_at(holder: list[Any], loc: tuple[int | str, ...]) -> bool:
    """Soften the node of ``holder[0]`` at a validation error's ``loc``; whether one changed.
    A step may also be a union's tag or a validator's label, not in the data (and a tag such
    as ``function`` may name a field too), so every reading of ``loc`` is tried."""
    changed = False
    for parent, key in _spots(holder, 0, loc):
        softened = _soften(parent[key])
        if softened != parent[key]:
            parent[key], changed = softened, True
    return changed


def _spots(parent: Any, key: int | str, loc: tuple[int | str, ...]) -> list[tuple[Any, Any]]:
    if not loc:
        return [(parent, key)]
    node, step = parent[key], loc[0]
    found = _spots(parent, key, loc[1:])  # the step as a tag or a label
    in_list = isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node)
    if in_list or (isinstance(node, dict) and step in node):
        found += _spots(node, step, loc[1:])
    return found


def _soften(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace(REDACTED, PLACEHOLDER)
    if isinstance(value, dict):
        return {k: _soften(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_soften(v) for v in value]
    return value


def _walk(value: Any, scrubber: _Scrubber, key: str | None) -> Any:
    """``value`` redacted: the very same object when nothing under it changed, else a copy
    of the containers on the way to each change (a run's EvalRun holds tens of thousands of
    nodes; copying them all made garbage for the collector and a model to validate again)."""
    if isinstance(value, str):  # the common case first: most nodes are strings
        if key is not None and value not in ("", REDACTED) and is_secret_key(key):
            return REDACTED
        return _same(value, scrubber.scrub(value))
    if isinstance(value, SecretStr):
        return REDACTED
    if key is not None and is_secret_key(key) and value is not None:
        return REDACTED if not isinstance(value, dict | list) else _mask_all(value)
    if isinstance(value, BaseModel):
        return _walk(value.model_dump(mode="json"), scrubber, key)
    if isinstance(value, dict):
        return _mask_all(value) if key in SECRET_MAPS else _walk_dict(value, scrubber)
    if isinstance(value, list | tuple):
        if value and all(isinstance(item, str) for item in value):
            argv = scrubber.argv(list(value))
            return value if isinstance(value, list) and argv == value else argv
        return _walk_list(value, scrubber)
    return value


_SCALARS = frozenset({int, float, bool})
"""Leaves that only a secret-named key redacts."""


def _same(value: Any, redacted: Any) -> Any:
    """``value`` itself when redacting it changed nothing (an equal string is the same)."""
    return value if redacted == value else redacted


def _walk_dict(value: dict[Any, Any], scrubber: _Scrubber) -> dict[Any, Any]:
    out: dict[Any, Any] | None = None
    for index, (k, v) in enumerate(value.items()):
        new_key = _same(k, scrubber.key(k)) if isinstance(k, str) else k
        if v is None or v.__class__ in _SCALARS:  # most leaves: as _walk would, inline
            new_value = REDACTED if v is not None and is_secret_key(str(k)) else v
        else:
            new_value = _walk(v, scrubber, str(k))
        if out is None:
            if new_key is k and new_value is v:
                continue
            out = dict(itertools.islice(value.items(), index))  # the unchanged ones before
        out[new_key] = new_value
    return value if out is None else out


def _walk_list(value: list[Any] | tuple[Any, ...], scrubber: _Scrubber) -> list[Any]:
    """A list comes back itself when unchanged; a tuple always as a list (as before)."""
    out: list[Any] | None = None if isinstance(value, list) else []
    for index, v in enumerate(value):
        new = _walk(v, scrubber, None)
        if out is None:
            if new is v:
                continue
            out = list(value[:index])  # the unchanged ones before
        out.append(new)
    if out is not None:
        return out
    assert isinstance(value, list)  # a tuple started its copy at once
    return value


def _mask_all(value: Any) -> Any:
    """Every text under a secret-named key masked. Numbers and booleans are kept: a map keyed
    by data (case ids, such as a case named ``secret``) holds counts and prices there, and a
    masked number would no longer be the number its model requires."""
    if isinstance(value, dict):
        return {k: _mask_all(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask_all(v) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return REDACTED
