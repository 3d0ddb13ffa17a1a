"""A model's ``config.json`` from the Hugging Face Hub: the only code in ``catalog`` on the network.

Through the package's one HTTP transport (``gpuwarden.transport``, standard library only), so hub
ids work with no extras installed; tests inject another transport. The environment variables are
the Hub's own, read on every call:

* ``HF_ENDPOINT``: the Hub or a mirror (default ``https://huggingface.co``).
* ``HF_TOKEN``: sent as ``Authorization: Bearer`` for gated and private repos, and only to the
  endpoint's own origin (a redirect to another host does not carry it).
* ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) = ``1``/``true``/``yes``/``on``: never try the
  network; only the cache answers.

Fetched configs are cached under ``$GPUWARDEN_CACHE_DIR/hub`` (default
``$XDG_CACHE_HOME/gpuwarden/hub``, else ``~/.cache/gpuwarden/hub``), one file per endpoint, repo and
revision, written atomically. A branch or tag (``main``) is fetched again on every call and the
cache answers only when the Hub cannot be reached; a full commit hash never changes, so its cached
copy answers without asking. A cache that cannot be written is skipped silently: the config was
fetched, and the command goes on.

A config huggingface_hub (transformers, vLLM, ``huggingface-cli download``) already downloaded
answers as gpuwarden's own cache does, read in place: ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``,
else ``$XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub`` (huggingface_hub's
environment variables page), in its documented layout ``models--<owner>--<name>/refs/<revision>``
(the commit) and ``snapshots/<commit>/config.json``.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gpuwarden import __version__
from gpuwarden.catalog.configs import MAX_CONFIG_FILE_BYTES
from gpuwarden.catalog.models import parse_config_json
from gpuwarden.documents import DocumentError, load_json_text
from gpuwarden.errors import CorruptInputError, EnvironmentProblemError, UnknownNameError
from gpuwarden.files import CaptureTooLargeError, read_capped
from gpuwarden.transport import (
    Request,
    Response,
    ResponseTooLargeError,
    Transport,
    TransportError,
    default_transport,
    http_url_problem,
    quote,
    split_url,
)

DEFAULT_ENDPOINT = "https://huggingface.co"
TIMEOUT_S = 10.0  # per connect / read; DNS resolution is not bounded by it (stdlib limit)
# a fetched config.json is bounded like a local one (the largest real one is a few hundred KiB)
MAX_CONFIG_BYTES = MAX_CONFIG_FILE_BYTES
_TRUE = frozenset({"1", "ON", "YES", "TRUE"})  # huggingface_hub's reading of boolean env vars

# huggingface_hub's validate_repo_id: letters, digits, "-", "_", "."; no leading/trailing "-" or
# "."; no "--" or ".."; at most 96 characters per repo name.
_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
_REPO_ID = re.compile(rf"(?P<owner>{_PART})/(?P<name>{_PART})")
# A branch, tag, commit hash or "refs/pr/N"; URL-quoted as one path segment.
_REVISION = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9._/-]{0,254})")
_COMMIT = re.compile(r"[0-9a-f]{40}")
_REF_BYTES = 64  # a ref file of huggingface_hub's cache holds one 40-hex commit


@dataclass(frozen=True, slots=True)
class HubId:
    """``owner/name[@revision]``; ``revision`` is ``main`` unless given."""

    repo_id: str
    revision: str = "main"
    revision_given: bool = False

    def __str__(self) -> str:
        return f"{self.repo_id}@{self.revision}" if self.revision_given else self.repo_id


@dataclass(frozen=True, slots=True)
class HubConfig:
    """A fetched (or cached) config and where it came from."""

    hub_id: HubId
    config: dict[str, object]
    url: str
    cache_path: Path | None  # where it is (or would be) cached; None when there is no cache dir
    from_cache: bool

    @property
    def source(self) -> str:
        if self.from_cache and self.cache_path is not None:
            return f"{self.cache_path} (cached from {self.url})"
        return self.url


def parse_hub_id(text: str) -> HubId | None:
    """``owner/name`` or ``owner/name@revision``; ``None`` when ``text`` is not of that shape."""
    repo_id, at, revision = text.strip().partition("@")
    if not _REPO_ID.fullmatch(repo_id) or "--" in repo_id or ".." in repo_id:
        return None
    if repo_id.endswith(".git"):
        return None
    if not at:
        return HubId(repo_id)
    if not _REVISION.fullmatch(revision) or ".." in revision or revision.endswith("/"):
        return None
    return HubId(repo_id, revision, revision_given=True)


def offline() -> bool:
    """``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) is set to a true value."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().upper() in _TRUE


def endpoint() -> str:
    """``HF_ENDPOINT`` without its trailing slash; it must be an http(s) URL."""
    value = (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).strip().rstrip("/")
    if http_url_problem(value, base=True) is not None:
        raise EnvironmentProblemError(
            f"HF_ENDPOINT={value!r} is not an http(s) URL",
            reference="hf-endpoint-invalid",
            hint=f"set HF_ENDPOINT to the Hub or a mirror, e.g. {DEFAULT_ENDPOINT}, or unset it",
        )
    return value


def config_url(base: str, hub_id: HubId) -> str:
    """``{endpoint}/{repo_id}/resolve/{revision}/config.json`` (revision quoted like the Hub)."""
    revision = quote(hub_id.revision, safe="")
    return f"{base}/{hub_id.repo_id}/resolve/{revision}/config.json"


def cache_dir() -> Path | None:
    """``$GPUWARDEN_CACHE_DIR``, else ``$XDG_CACHE_HOME/gpuwarden``, else ``~/.cache/gpuwarden``."""
    if override := os.environ.get("GPUWARDEN_CACHE_DIR"):
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and Path(xdg).is_absolute():  # the XDG spec says to ignore a relative path
        return Path(xdg) / "gpuwarden"
    try:
        return Path.home() / ".cache" / "gpuwarden"
    except RuntimeError:  # no HOME and no passwd entry: run without a cache
        return None


def cache_path(base: str, hub_id: HubId) -> Path | None:
    """``<cache>/hub/<endpoint>/<owner>/<name>/<revision>/config.json``."""
    root = cache_dir()
    if root is None:
        return None
    parts = split_url(base)
    port = f":{parts.port}" if parts.port else ""  # no user:password@ in a folder name
    host = quote(f"{parts.hostname}{port}{parts.path}", safe="")
    owner, name = hub_id.repo_id.split("/")
    revision = quote(hub_id.revision, safe="")
    return root / "hub" / host / owner / name / revision / "config.json"


def hf_hub_cache_dir() -> Path | None:
    """Where huggingface_hub caches repositories, found as it finds it."""
    env = os.environ
    if override := env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE"):
        return Path(override).expanduser()
    if home := env.get("HF_HOME"):
        return Path(home).expanduser() / "hub"
    if xdg := env.get("XDG_CACHE_HOME"):
        return Path(xdg).expanduser() / "huggingface" / "hub"
    try:
        return Path.home() / ".cache" / "huggingface" / "hub"
    except RuntimeError:  # no HOME and no passwd entry
        return None


def hf_cache_path(hub_id: HubId) -> Path | None:
    """The ``config.json`` huggingface_hub holds for ``hub_id``'s revision, or None (no such
    cache, revision never downloaded, or a revision that would leave the repository's folder)."""
    root = hf_hub_cache_dir()
    if root is None or ".." in hub_id.revision.split("/"):
        return None
    repo = root / ("models--" + hub_id.repo_id.replace("/", "--"))
    commit: str | None = hub_id.revision
    if not _COMMIT.fullmatch(hub_id.revision):
        raw = _cache_file_bytes(repo / "refs" / hub_id.revision, _REF_BYTES)
        if raw is None:
            return None
        text = raw.decode("ascii", "replace").strip()
        commit = text if _COMMIT.fullmatch(text) else None
    return None if commit is None else repo / "snapshots" / commit / "config.json"


def fetch_config(
    hub_id: HubId, *, timeout: float = TIMEOUT_S, transport: Transport | None = None
) -> HubConfig:
    """The hub config of ``hub_id``: from the Hub (cached afterwards) or from the cache.

    Raises ``EnvironmentProblemError`` ``model-hub-unreachable`` (offline, no network, DNS,
    timeout, Hub error) and ``model-hub-gated`` (401/403), ``UnknownNameError`` ``unknown-model``
    (404) and ``CorruptInputError`` ``config-not-json`` (an answer that is not a JSON object).
    """
    base = endpoint()
    url = config_url(base, hub_id)
    cached_at, downloaded = cache_path(base, hub_id), hf_cache_path(hub_id)
    hit = _cache_hit(hub_id, url, cached_at) or _cache_hit(hub_id, url, downloaded)
    if hit is not None and (offline() or _COMMIT.fullmatch(hub_id.revision)):
        return hit
    if offline():
        raise EnvironmentProblemError(
            f"model {str(hub_id)!r} is not in the catalog nor in the hub cache, and HF_HUB_OFFLINE "
            "is set, so gpuwarden does not try the Hugging Face Hub",
            reference="model-hub-unreachable",
            context=_looked_for(cached_at, downloaded, hf_hub_cache_dir()),
            hint="unset HF_HUB_OFFLINE, or " + _download(hub_id, base),
        )
    try:
        answer = _get(url, timeout, transport or default_transport())
    except _UnreachableError as exc:
        if hit is not None:
            return hit
        raise EnvironmentProblemError(
            f"cannot fetch the config of {str(hub_id)!r} from {base}: {exc}",
            reference="model-hub-unreachable",
            context=f"GET {url}",
            hint="check the network, proxy and HF_ENDPOINT; or " + _download(hub_id, base),
        ) from exc
    if not answer.ok:
        raise _http_error(answer, hub_id, url, base)
    config = _parse(answer.body, url, hub_id, base)
    if cached_at is not None:
        _write_cache(cached_at, answer.body)
    return HubConfig(hub_id, config, url, cached_at, from_cache=False)


def _cache_hit(hub_id: HubId, url: str, path: Path | None) -> HubConfig | None:
    cached = _read_cache(path)
    return None if cached is None else HubConfig(hub_id, cached, url, path, from_cache=True)


def _looked_for(ours: Path | None, theirs: Path | None, hf_root: Path | None) -> str | None:
    places = [_place(p) for p in (ours, theirs) if p is not None]
    if theirs is None and hf_root is not None:
        places.append(f"{hf_root} (huggingface_hub's cache: revision not downloaded)")
    return f"looked for {' and '.join(places)}" if places else None


def _place(path: Path) -> str:
    """A cache entry that did not answer, and why when it is there: a snapshot's link to a
    blob that was deleted, a folder, a FIFO, a file cut short or too large are not "missing"."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return f"{path} (a link to a missing file)" if os.path.islink(path) else str(path)
    except OSError as exc:
        return f"{path} ({exc.strerror or 'unreadable'})"
    if not stat.S_ISREG(info.st_mode):
        return f"{path} (not a regular file)"
    if info.st_size > MAX_CONFIG_BYTES:
        return f"{path} (larger than {MAX_CONFIG_BYTES >> 20} MiB)"
    return f"{path} (not a config's JSON object)"


class _UnreachableError(Exception):
    """No usable answer: no network, DNS, refused, timeout, cut off, 5xx, 429."""


def _get(url: str, timeout: float, transport: Transport) -> Response:
    """The Hub's answer; 2xx and 4xx are answers, everything else is ``_UnreachableError``."""
    headers = {"User-Agent": f"gpuwarden/{__version__}", "Accept": "application/json"}
    if token := os.environ.get("HF_TOKEN", "").strip():
        if "\r" in token or "\n" in token or not _latin1(token):  # no HTTP header carries it
            raise EnvironmentProblemError(
                "HF_TOKEN is not a valid token: it holds a line break or a character an HTTP "
                "header cannot carry",
                reference="hf-token-invalid",
                hint="set HF_TOKEN to a read token of your Hugging Face account, or unset it",
            )
        headers["Authorization"] = f"Bearer {token}"  # the transport keeps it on the origin
    request = Request("GET", url, headers, timeout_s=timeout, max_bytes=MAX_CONFIG_BYTES)
    try:
        answer = transport.send(request)
    except ResponseTooLargeError:
        raise CorruptInputError(
            f"{url}: the answer is larger than {MAX_CONFIG_BYTES // 2**20} MiB, not a config.json",
            reference="config-not-json",
            hint="check HF_ENDPOINT; or download config.json and pass its path",
        ) from None
    except TransportError as exc:
        raise _UnreachableError(exc.problem) from exc
    if answer.status == 429 or answer.status >= 500:
        raise _UnreachableError(f"the server answered HTTP {answer.status} {answer.reason}")
    return answer


def _latin1(text: str) -> bool:
    try:
        text.encode("latin-1")
    except UnicodeEncodeError:
        return False
    return True


def _http_error(answer: Response, hub_id: HubId, url: str, base: str) -> Exception:
    """401/403/404 (and any other answer that is not a 2xx) as the error a user can act on."""
    code = answer.status
    error_code = answer.header("X-Error-Code") or ""
    message = answer.header("X-Error-Message") or ""
    said = (
        f"HTTP {code}"
        + (f" {error_code}" if error_code else "")
        + (f": {message}" if message else "")
    )
    page = f"{base}/{hub_id.repo_id}"
    if code == 404:
        what = {
            "EntryNotFound": f"the repo has no config.json at revision {hub_id.revision!r} (GGUF, "
            "adapter-only and dataset repos have none); pass a config.json path instead",
            "RevisionNotFound": f"the repo has no revision {hub_id.revision!r}; check the part "
            "after '@'",
        }.get(
            error_code,
            f"check the hub id at {page} (a private repo needs HF_TOKEN); if you meant a "
            "local config.json, that path does not exist",
        )
        err = UnknownNameError("model", str(hub_id), hint=what)
        err.context = f"GET {url} → {said}"
        return err
    if code in {401, 403}:
        token_set = bool(os.environ.get("HF_TOKEN", "").strip())
        if message == "Invalid credentials in Authorization header":
            hint = "HF_TOKEN is set but the Hub rejected it: create a new read token"
        elif token_set:
            hint = (
                f"accept the model's licence at {page} with the account of HF_TOKEN (a "
                "fine-grained token needs read access to gated repos), and check the hub id"
            )
        else:
            hint = f"set HF_TOKEN to a read token of an account that accepted the licence at {page}"
            if error_code != "GatedRepo":
                hint += " (and check the hub id: the Hub also answers 401 for a missing repo)"
        return EnvironmentProblemError(
            f"the Hugging Face Hub refused the config of {str(hub_id)!r}: "
            + (
                "the repo is gated"
                if error_code == "GatedRepo"
                else "the repo is gated or private" + ("" if token_set else ", or does not exist")
            ),
            reference="model-hub-gated",
            context=f"GET {url} → {said}",
            hint=hint,
        )
    return EnvironmentProblemError(
        f"the Hugging Face Hub did not serve the config of {str(hub_id)!r}: {said}",
        reference="model-hub-error",
        context=f"GET {url}",
        hint="retry later, or " + _download(hub_id, base),
    )


def _download(hub_id: HubId, base: str) -> str:
    revision = quote(hub_id.revision, safe="")
    return (
        f"download {base}/{hub_id.repo_id}/blob/{revision}/config.json on a connected machine "
        "and pass the file's path instead"
    )


def _parse(body: bytes, url: str, hub_id: HubId, base: str) -> dict[str, object]:
    hint = (
        "something other than the Hub may have answered (a proxy or a login page): check "
        f"HF_ENDPOINT and the proxy; or {_download(hub_id, base)}"
    )
    html = " (it looks like HTML)" if body.lstrip()[:1] == b"<" else ""
    return parse_config_json(body, f"{url}: the answer for {str(hub_id)!r}{html}", hint)


def _read_cache(path: Path | None) -> dict[str, object] | None:
    """The cached config, or ``None`` when there is none (or it is unreadable: fetch again)."""
    raw = None if path is None else _cache_file_bytes(path, MAX_CONFIG_BYTES)
    if raw is None:
        return None
    try:
        cfg = load_json_text(raw)
    except DocumentError:
        return None  # not a config: fetch again
    return cfg if isinstance(cfg, dict) else None


def _cache_file_bytes(path: Path, limit: int) -> bytes | None:
    """The bytes of a file in a cache (ours or huggingface_hub's), or None when it is missing,
    unreadable, larger than ``limit`` or not a regular file (a link to one counts: snapshots
    link to blobs). A FIFO left there would block the open until some writer came, and a
    device may never end: a cache entry is a file, anything else is no entry."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return None
        raw, _ = read_capped(str(path), limit)
    except (OSError, CaptureTooLargeError):
        return None
    return raw


def _write_cache(path: Path, body: bytes) -> None:
    """Write ``path`` atomically (temp file in the same folder, fsync, rename); skip on failure."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".config.", suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(body)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
