"""Prometheus' web configuration file (``--web.config.file`` of exporter-toolkit): TLS and basic
authentication for ``gpuwarden export``, read in the format every Prometheus exporter shares
(prometheus/exporter-toolkit docs/web-configuration.md).

Supported: ``tls_server_config`` (``cert_file``/``key_file`` or inline ``cert``/``key``,
``client_ca_file``/``client_ca`` with ``client_auth_type`` NoClientCert, VerifyClientCertIfGiven or
RequireAndVerifyClientCert, ``min_version``/``max_version``, ``prefer_server_cipher_suites``),
``http_server_config.headers`` and ``http2`` (accepted; the exporter speaks HTTP/1.1), and
``basic_auth_users`` with bcrypt hashes (``htpasswd -nBC 10 "" | tr -d ':\\n'``). Keys the format
defines but this server cannot honour the same way — Go cipher-suite and curve names,
``client_allowed_sans``, ``rate_limit``, and the two client-auth types that ask for a certificate
without verifying it — are refused with an error rather than silently ignored: a security setting
that does nothing is worse than one that says it cannot be applied. Unknown keys are refused as
exporter-toolkit refuses them (strict YAML). Relative paths are relative to the file's folder, as
exporter-toolkit resolves them.

A verified password is remembered (a hash of user, password and bcrypt hash, bounded), so the
bcrypt cost (~70 ms at cost 10) is paid once per credential, not per scrape; an unknown user is
checked against a dummy hash so that timing does not tell which users exist.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import ssl
import tempfile
import threading
import time
from base64 import b64decode
from binascii import Error as Base64Error
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwarden.documents import DocumentError, load_yaml_text
from gpuwarden.errors import CorruptInputError, InputError, InvalidConfigError, MissingExtraError
from gpuwarden.files import CaptureTooLargeError, read_capped

MAX_FILE_BYTES = 1 << 20
RELOAD_CHECK_S = 1.0  # at most one stat of the files per second
_HINT = (
    "see the web configuration format of prometheus/exporter-toolkit "
    "(docs/web-configuration.md); e.g. tls_server_config: {cert_file: server.crt, key_file: "
    "server.key} and basic_auth_users: {prometheus: <bcrypt hash>}"
)
_TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_UNVERIFIED_CLIENT_AUTH = ("RequestClientCert", "RequireAnyClientCert")
_TLS_KEYS = frozenset(
    {
        "cert_file",
        "key_file",
        "cert",
        "key",
        "client_ca_file",
        "client_ca",
        "client_auth_type",
        "min_version",
        "max_version",
        "prefer_server_cipher_suites",
    }
)
_UNSUPPORTED = {
    "cipher_suites": "Go cipher-suite names have no OpenSSL equivalent here",
    "curve_preferences": "Go curve names have no OpenSSL equivalent here",
    "client_allowed_sans": "client certificate SAN allow-lists are not implemented",
    "rate_limit": "rate limiting is not implemented (put a proxy in front)",
}
_HEADERS = {
    "Content-Security-Policy": None,
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-Content-Type-Options": ("nosniff",),
    "X-XSS-Protection": None,
    "Strict-Transport-Security": None,
}
_BCRYPT = re.compile(r"^\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}$")  # cost 4..31
MAX_REMEMBERED = 64  # verified credentials kept
# bcrypt reads at most this much of a password: htpasswd and Go's x/crypto/bcrypt (what
# exporter-toolkit checks with) ignore the rest; the bcrypt package ≥ 5 raises instead
BCRYPT_PASSWORD_BYTES = 72
_log = logging.getLogger("gpuwarden.export")


def _problem(source: str, text: str) -> CorruptInputError:
    return CorruptInputError(f"{source}: {text}", reference="web-config-invalid", hint=_HINT)


def _unsupported(source: str, key: str, why: str) -> InvalidConfigError:
    return InvalidConfigError(
        f"{source}: {key} cannot be honoured by gpuwarden export ({why})",
        reference="web-config-unsupported",
        hint=f"remove {key} from the file; TLS, client certificates (RequireAndVerifyClientCert) "
        "and basic_auth_users are supported",
    )


def _yaml() -> Any:
    try:
        import yaml
    except ImportError:
        raise MissingExtraError("export --web-config-file", "exporter", "pyyaml") from None
    return yaml


def _bcrypt() -> Any:
    try:
        import bcrypt
    except ImportError:
        raise MissingExtraError(
            "basic_auth_users in --web-config-file", "exporter", "bcrypt"
        ) from None
    return bcrypt


@dataclass(frozen=True, slots=True)
class TlsSettings:
    cert_file: Path | None = None
    key_file: Path | None = None
    cert: str | None = None  # inline PEM
    key: str | None = None
    client_ca_file: Path | None = None
    client_ca: str | None = None
    client_auth_type: str = "NoClientCert"
    min_version: str = "TLS12"
    max_version: str = "TLS13"
    prefer_server_cipher_suites: bool = True

    def files(self) -> tuple[Path, ...]:
        return tuple(p for p in (self.cert_file, self.key_file, self.client_ca_file) if p)


@dataclass(frozen=True, slots=True)
class WebConfig:
    source: str
    tls: TlsSettings | None = None
    users: Mapping[str, bytes] | None = None  # user → bcrypt hash; None = no authentication
    headers: tuple[tuple[str, str], ...] = ()


# --- parsing ------------------------------------------------------------------------------------


class _InvalidError(Exception):
    """A problem of the document; ``parse_web_config`` names the file (web-config-invalid)."""


class _UnsupportedError(Exception):
    """A setting this server cannot honour (web-config-unsupported)."""

    def __init__(self, key: str, why: str) -> None:
        super().__init__(key, why)
        self.key, self.why = key, why


def _mapping(value: object, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise _InvalidError(f"{where} must be a mapping of names to values")
    return value


def _string(value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise _InvalidError(f"{where} must be a non-empty string")
    return value


def _check_keys(table: dict[str, Any], allowed: frozenset[str], where: str = "") -> None:
    for key in table:
        name = f"{where}.{key}" if where else key
        if key in _UNSUPPORTED:
            raise _UnsupportedError(name, _UNSUPPORTED[key])
        if key not in allowed:
            raise _InvalidError(f"unknown key {name}")


def _path(base: Path, value: str) -> Path:
    path = Path(value)
    return path if path.is_absolute() else base / path


def _tls(table: dict[str, Any], base: Path) -> TlsSettings:
    _check_keys(table, _TLS_KEYS, "tls_server_config")
    strings = {
        k: _string(v, f"tls_server_config.{k}")
        for k, v in table.items()
        if k != "prefer_server_cipher_suites"
    }
    prefer = table.get("prefer_server_cipher_suites", True)
    if not isinstance(prefer, bool):
        raise _InvalidError("tls_server_config.prefer_server_cipher_suites must be true or false")
    for inline, file in (
        ("cert", "cert_file"),
        ("key", "key_file"),
        ("client_ca", "client_ca_file"),
    ):
        if inline in strings and file in strings:
            raise _InvalidError(f"tls_server_config has both {inline} and {file}: give one")
    if ("cert" in strings or "cert_file" in strings) != ("key" in strings or "key_file" in strings):
        raise _InvalidError("tls_server_config needs both a certificate and its key")
    if "cert" not in strings and "cert_file" not in strings:
        raise _InvalidError("tls_server_config needs cert_file and key_file (or cert and key)")
    auth = strings.get("client_auth_type", "NoClientCert")
    if auth in _UNVERIFIED_CLIENT_AUTH:
        raise _UnsupportedError(f"client_auth_type {auth}", "it accepts unverified certificates")
    if auth not in _CLIENT_AUTH:
        raise _InvalidError(f"client_auth_type {auth!r} is not one of {', '.join(_CLIENT_AUTH)}")
    has_ca = "client_ca" in strings or "client_ca_file" in strings
    if has_ca != (auth != "NoClientCert"):
        raise _InvalidError(
            "a client CA needs client_auth_type RequireAndVerifyClientCert (or "
            "VerifyClientCertIfGiven), and those need a client CA"
        )
    for key in ("min_version", "max_version"):
        if key in strings and strings[key] not in _TLS_VERSIONS:
            raise _InvalidError(f"{key} {strings[key]!r} is not one of {', '.join(_TLS_VERSIONS)}")
    files = {
        k: _path(base, strings[k])
        for k in ("cert_file", "key_file", "client_ca_file")
        if k in strings
    }
    return TlsSettings(
        cert_file=files.get("cert_file"),
        key_file=files.get("key_file"),
        cert=strings.get("cert"),
        key=strings.get("key"),
        client_ca_file=files.get("client_ca_file"),
        client_ca=strings.get("client_ca"),
        client_auth_type=auth,
        min_version=strings.get("min_version", "TLS12"),
        max_version=strings.get("max_version", "TLS13"),
        prefer_server_cipher_suites=prefer,
    )


def _users(table: dict[str, Any]) -> dict[str, bytes]:
    users: dict[str, bytes] = {}
    for user, hashed in table.items():
        if not user or ":" in user:
            raise _InvalidError(f"basic_auth_users: {user!r} is not a valid user name")
        if not isinstance(hashed, str) or not _BCRYPT.match(hashed):
            raise _InvalidError(
                f"basic_auth_users.{user} is not a bcrypt hash ($2a$/$2b$/$2y$, 60 characters); "
                "store the hash, never the password"
            )
        users[user] = hashed.encode()
    return users


def _headers(table: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    out = []
    for name, value in table.items():
        if name not in _HEADERS:
            raise _InvalidError(
                f"http_server_config.headers.{name} is not a header the format allows"
            )
        text = "" if value is None else _string(value, f"headers.{name}")
        allowed = _HEADERS[name]
        if allowed is not None and text and text.lower() not in allowed:
            raise _InvalidError(f"headers.{name} must be one of {', '.join(allowed)}")
        if "\n" in text or "\r" in text:
            raise _InvalidError(f"headers.{name} must be one line")
        if text:
            out.append((name, text))
    return tuple(out)


def _document(text: str) -> object:
    try:
        return load_yaml_text(text, _yaml())
    except DocumentError as exc:
        raise _InvalidError(str(exc)) from None


def _parse(text: str, source: str, base: Path) -> WebConfig:
    top = _mapping(_document(text), "the file")
    _check_keys(top, frozenset({"tls_server_config", "http_server_config", "basic_auth_users"}))
    http = _mapping(top.get("http_server_config"), "http_server_config")
    _check_keys(http, frozenset({"http2", "headers"}), "http_server_config")
    if "http2" in http and not isinstance(http["http2"], bool):
        raise _InvalidError("http_server_config.http2 must be true or false")
    tls_table = top.get("tls_server_config")
    users = _users(_mapping(top.get("basic_auth_users"), "basic_auth_users"))
    return WebConfig(
        source=source,
        tls=None if tls_table is None else _tls(_mapping(tls_table, "tls_server_config"), base),
        users=users or None,
        headers=_headers(_mapping(http.get("headers"), "http_server_config.headers")),
    )


def parse_web_config(text: str, source: str, base: Path) -> WebConfig:
    """A web configuration document; relative paths resolve against ``base``; ``source`` names
    it in errors."""
    try:
        return _parse(text, source, base)
    except _InvalidError as exc:
        raise _problem(source, str(exc)) from None
    except _UnsupportedError as exc:
        raise _unsupported(source, exc.key, exc.why) from None


def read_web_config(path: str) -> WebConfig:
    """Read, parse and check a web configuration file (its TLS material included)."""
    file = Path(path)
    try:
        data, _ = read_capped(path, MAX_FILE_BYTES)
    except OSError as exc:
        raise InputError(
            f"{path}: cannot be read ({exc.strerror or exc})",
            reference="web-config-unreadable",
            hint="pass the path of a Prometheus web configuration file (YAML)",
        ) from None
    except CaptureTooLargeError:
        raise _problem(
            path, f"larger than {MAX_FILE_BYTES} bytes: not a web configuration file"
        ) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _problem(path, "not UTF-8 text") from None
    config = parse_web_config(text, path, file.resolve().parent)
    if config.tls is not None:
        tls_context(config)  # a certificate or key that cannot be loaded fails now, not per scrape
    if config.users:
        _bcrypt()
    return config


# --- TLS ----------------------------------------------------------------------------------------


def _load_chain(context: ssl.SSLContext, tls: TlsSettings) -> None:
    if tls.cert_file is not None and tls.key_file is not None:
        context.load_cert_chain(tls.cert_file, tls.key_file)
        return
    # inline PEM: ssl loads a chain only from files; a private temporary folder, removed at once
    with tempfile.TemporaryDirectory(prefix="gpuwarden-tls-") as folder:
        cert, key = Path(folder) / "cert.pem", Path(folder) / "key.pem"
        for path, text in ((cert, tls.cert or ""), (key, tls.key or "")):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
        context.load_cert_chain(cert, key)


def tls_context(config: WebConfig) -> ssl.SSLContext | None:
    """The server-side SSL context of ``config``; None without ``tls_server_config``."""
    tls = config.tls
    if tls is None:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.minimum_version = _TLS_VERSIONS[tls.min_version]
        context.maximum_version = _TLS_VERSIONS[tls.max_version]
        if tls.prefer_server_cipher_suites:
            context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
        _load_chain(context, tls)
        context.verify_mode = _CLIENT_AUTH[tls.client_auth_type]
        if tls.client_ca_file is not None:
            context.load_verify_locations(cafile=tls.client_ca_file)
        elif tls.client_ca is not None:
            context.load_verify_locations(cadata=tls.client_ca)
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise CorruptInputError(
            f"{config.source}: the TLS certificate, key or client CA cannot be loaded ({exc})",
            reference="web-config-tls",
            hint="check that cert_file/key_file are a PEM certificate and its matching private "
            "key (unencrypted), readable by this user",
        ) from None
    return context


# --- basic authentication ----------------------------------------------------------------------


class BasicAuth:
    """Checks ``Authorization: Basic …`` against bcrypt hashes; thread-safe."""

    def __init__(self, users: Mapping[str, bytes]) -> None:
        self._users = dict(users)
        # an unknown user costs what a known one costs: a hash of the same bcrypt cost
        cost = int(next(iter(self._users.values()))[4:6]) if self._users else 10
        self._dummy = _bcrypt().hashpw(b"unknown user", _bcrypt().gensalt(cost))
        self._verified: dict[bytes, None] = {}  # insertion-ordered, bounded
        self._lock = threading.Lock()

    def check(self, header: str | None) -> bool:
        credentials = _credentials(header)
        if credentials is None:
            return False
        user, password = credentials
        hashed = self._users.get(user)
        key = hashlib.sha256(b"\0".join((user.encode(), password, hashed or b""))).digest()
        with self._lock:
            if hashed is not None and key in self._verified:
                return True
        bcrypt = _bcrypt()
        try:
            read = password[:BCRYPT_PASSWORD_BYTES]
            good = bool(bcrypt.checkpw(read, hashed or self._dummy)) and hashed is not None
        except ValueError:
            good = False
        if good:
            with self._lock:
                self._verified[key] = None
                while len(self._verified) > MAX_REMEMBERED:
                    del self._verified[next(iter(self._verified))]
        return good


def _credentials(header: str | None) -> tuple[str, bytes] | None:
    if not header:
        return None
    scheme, _, encoded = header.strip().partition(" ")
    if scheme.lower() != "basic" or not encoded:
        return None
    try:
        decoded = b64decode(encoded.strip(), validate=True)
    except (Base64Error, ValueError):
        return None
    user, sep, password = decoded.partition(b":")
    if not sep:
        return None
    return user.decode("utf-8", errors="replace"), password


# --- the file, reloaded when it changes -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ActiveWebConfig:
    config: WebConfig
    context: ssl.SSLContext | None
    auth: BasicAuth | None


def _stamp(paths: tuple[Path, ...]) -> tuple[tuple[int, int], ...]:
    out = []
    for path in paths:
        try:
            stat = path.stat()
            out.append((stat.st_mtime_ns, stat.st_size))
        except OSError:
            out.append((-1, -1))
    return tuple(out)


def _activate(config: WebConfig) -> ActiveWebConfig:
    auth = BasicAuth(config.users) if config.users else None
    return ActiveWebConfig(config, tls_context(config), auth)


class WebConfigSource:
    """The web configuration in force: the file and its TLS files are looked at again at most
    once per RELOAD_CHECK_S, and a changed set is loaded (certificate rotation needs no
    restart, as with exporter-toolkit). A change that does not load keeps the last good one."""

    def __init__(self, path: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self._clock = clock
        config = read_web_config(path)
        self._active = _activate(config)
        self._stamp = _stamp(self._watched(config))
        self._checked = clock()
        self._lock = threading.Lock()
        self.reload_errors = 0
        self.last_error: str | None = None

    def _watched(self, config: WebConfig) -> tuple[Path, ...]:
        return (Path(self.path), *(config.tls.files() if config.tls else ()))

    def current(self) -> ActiveWebConfig:
        now = self._clock()
        if now - self._checked < RELOAD_CHECK_S:
            return self._active
        with self._lock:
            if now - self._checked < RELOAD_CHECK_S:
                return self._active
            self._checked = now
            stamp = _stamp(self._watched(self._active.config))
            if stamp != self._stamp:
                self._stamp = stamp
                try:
                    self._active = _activate(read_web_config(self.path))
                    self._stamp = _stamp(self._watched(self._active.config))
                except (InputError, MissingExtraError) as exc:
                    self.reload_errors += 1
                    self.last_error = exc.message
                    _log.warning("web config not reloaded, the previous one stays: %s", exc.message)
            return self._active
