"""Hub ids (``owner/name[@revision]``) against a real HTTP server on 127.0.0.1.

The server is ``http.server`` in a thread, bounded (it stops itself after ``LIFETIME_S``), serving
the real bundled configs from ``../shared/fixtures/models``. Nothing here leaves the loopback
interface: ``HF_ENDPOINT`` points at the local server, proxies are switched off, and a guard fails
any test that resolves a host other than 127.0.0.1.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.catalog import hub, resolve_model
from gpuwarden.errors import CorruptInputError, EnvironmentProblemError, UnknownNameError

QWEN_7B_PARAMETERS = 7_615_616_512  # fixtures/models/SOURCES.md, as transformers instantiates it
REPO = "Qwen/Qwen2.5-7B-Instruct"  # not bundled: resolve_model goes to the hub (same config)
CONFIG_PATH = f"/{REPO}/resolve/main/config.json"
COMMIT = "a09a35458c702b33eeacc393d103063234e8bc28"
LIFETIME_S = 30.0


@dataclass(frozen=True)
class Route:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


class _Server(HTTPServer):
    routes: dict[str, Route]
    seen: list[tuple[str, dict[str, str]]]

    def server_bind(self) -> None:
        # HTTPServer.server_bind asks getfqdn() (a reverse DNS lookup); the name is known.
        socketserver.TCPServer.server_bind(self)
        self.server_name = "127.0.0.1"
        self.server_port = self.server_address[1]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        self.server.seen.append((self.path, dict(self.headers.items())))
        route = self.server.routes.get(
            self.path, Route(404, b"Repository not found", {"X-Error-Code": "RepoNotFound"})
        )
        self.send_response(route.status)
        for name, value in route.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(route.body)))
        self.end_headers()
        self.wfile.write(route.body)

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        pass


class HubServer:
    """``routes`` served on 127.0.0.1 from a thread until ``stop()`` or ``LIFETIME_S``."""

    def __init__(self, routes: dict[str, Route]) -> None:
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.routes = routes
        self._httpd.seen = []
        self._httpd.timeout = 0.05  # handle_request() returns this often to check the stop flag
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="hub-server", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_port}"

    @property
    def port(self) -> int:
        return self._httpd.server_port

    @property
    def seen(self) -> list[tuple[str, dict[str, str]]]:
        return self._httpd.seen

    @property
    def paths(self) -> list[str]:
        return [path for path, _ in self.seen]

    def _serve(self) -> None:
        deadline = time.monotonic() + LIFETIME_S
        while not self._stop.is_set() and time.monotonic() < deadline:
            self._httpd.handle_request()

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout=5)
        self._httpd.server_close()


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Clean hub environment, a private cache, no proxies, and no host but 127.0.0.1."""
    for var in (
        "HF_TOKEN",
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "XDG_CACHE_HOME",
        "HF_HOME",
        "HUGGINGFACE_HUB_CACHE",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("no_proxy", "*")
    monkeypatch.setenv("GPUWARDEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-hub"))  # never the machine's own
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # until a test starts its server
    real_getaddrinfo = socket.getaddrinfo

    def loopback_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host != "127.0.0.1":
            raise AssertionError(f"a test tried to resolve {host!r}: only 127.0.0.1 is allowed")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", loopback_getaddrinfo)


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[dict[str, Route]], HubServer]]:
    """Start a server (HF_ENDPOINT points at the latest one); all stop after the test."""
    servers: list[HubServer] = []

    def start(routes: dict[str, Route]) -> HubServer:
        server = HubServer(routes)
        servers.append(server)
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="module")
def qwen_config(fixtures: Path) -> bytes:
    return (fixtures / "models" / "Qwen2.5-7B.json").read_bytes()


def _config_route(body: bytes) -> Route:
    return Route(200, body, {"Content-Type": "application/json"})


def _cached_files(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cache").rglob("*"))


def test_fetches_a_real_config_and_counts_its_parameters(
    serve: Callable[[dict[str, Route]], HubServer], qwen_config: bytes
) -> None:
    server = serve({CONFIG_PATH: _config_route(qwen_config)})
    spec = resolve_model(REPO)
    assert spec.total_parameters == QWEN_7B_PARAMETERS
    assert spec.name == REPO
    assert spec.model_type == "qwen2"
    assert spec.source == f"{server.url}{CONFIG_PATH}"
    [(path, headers)] = server.seen
    assert path == CONFIG_PATH
    assert headers["User-Agent"].startswith("gpuwarden/")
    assert "Authorization" not in headers


def test_revision_goes_into_the_url_quoted_like_the_hub(
    serve: Callable[[dict[str, Route]], HubServer], qwen_config: bytes
) -> None:
    server = serve(
        {
            f"/{REPO}/resolve/v1.0/config.json": _config_route(qwen_config),
            f"/{REPO}/resolve/refs%2Fpr%2F12/config.json": _config_route(qwen_config),
        }
    )
    assert resolve_model(f"{REPO}@v1.0").name == f"{REPO}@v1.0"
    assert resolve_model(f"{REPO}@refs/pr/12").total_parameters == QWEN_7B_PARAMETERS
    assert server.paths == [
        f"/{REPO}/resolve/v1.0/config.json",
        f"/{REPO}/resolve/refs%2Fpr%2F12/config.json",
    ]


def test_a_bundled_tail_with_a_revision_goes_to_the_hub(
    serve: Callable[[dict[str, Route]], HubServer], qwen_config: bytes
) -> None:
    # "Qwen/Qwen2.5-7B" alone is the bundled entry; with a revision the user asks the hub.
    server = serve({f"/Qwen/Qwen2.5-7B/resolve/{COMMIT}/config.json": _config_route(qwen_config)})
    assert resolve_model("Qwen/Qwen2.5-7B").source == "catalog:Qwen2.5-7B"
    assert server.paths == []
    assert resolve_model(f"Qwen/Qwen2.5-7B@{COMMIT}").total_parameters == QWEN_7B_PARAMETERS
    assert len(server.paths) == 1


def test_hf_token_is_sent_as_a_bearer_token(
    serve: Callable[[dict[str, Route]], HubServer],
    qwen_config: bytes,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = serve({CONFIG_PATH: _config_route(qwen_config)})
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    resolve_model(REPO)
    [(_, headers)] = server.seen
    assert headers["Authorization"] == "Bearer hf_test_token"


def test_token_follows_a_redirect_on_the_same_origin_only(
    serve: Callable[[dict[str, Route]], HubServer],
    qwen_config: bytes,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    cdn = serve({"/cdn/config.json": _config_route(qwen_config)})
    renamed = "/Qwen/renamed/resolve/main/config.json"
    server = serve(
        {
            CONFIG_PATH: Route(307, b"", {"Location": renamed}),  # a renamed repo: relative
            renamed: Route(302, b"", {"Location": f"{cdn.url}/cdn/config.json"}),
        }
    )
    assert resolve_model(REPO).total_parameters == QWEN_7B_PARAMETERS
    assert [h.get("Authorization") for _, h in server.seen] == ["Bearer hf_test_token"] * 2
    [(_, cdn_headers)] = cdn.seen
    assert "Authorization" not in cdn_headers


def test_404_is_an_unknown_model_naming_the_hub_id(
    serve: Callable[[dict[str, Route]], HubServer],
) -> None:
    serve({})
    with pytest.raises(UnknownNameError) as info:
        resolve_model("someone/no-such-model")
    err = info.value
    assert err.reference == "unknown-model"
    assert err.exit_code == 2
    assert err.name == "someone/no-such-model"
    assert "someone/no-such-model" in (err.hint or "")
    assert "404 RepoNotFound" in (err.context or "")


def test_404_of_a_repo_without_config_json_says_so(
    serve: Callable[[dict[str, Route]], HubServer],
) -> None:
    serve({CONFIG_PATH: Route(404, b"Entry not found", {"X-Error-Code": "EntryNotFound"})})
    with pytest.raises(UnknownNameError) as info:
        resolve_model(REPO)
    assert info.value.reference == "unknown-model"
    assert "no config.json" in (info.value.hint or "")


def test_401_without_a_token_asks_for_hf_token(
    serve: Callable[[dict[str, Route]], HubServer],
) -> None:
    serve({CONFIG_PATH: Route(401, b"Unauthorized", {"X-Error-Code": "GatedRepo"})})
    with pytest.raises(EnvironmentProblemError) as info:
        resolve_model(REPO)
    err = info.value
    assert err.reference == "model-hub-gated"
    assert err.exit_code == 4
    assert REPO in err.message
    assert "HF_TOKEN" in (err.hint or "")
    assert REPO in (err.hint or "")
    assert "HTTP 401" in (err.context or "")


def test_403_with_a_token_asks_to_accept_the_licence(
    serve: Callable[[dict[str, Route]], HubServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = serve({CONFIG_PATH: Route(403, b"Forbidden", {"X-Error-Code": "GatedRepo"})})
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    with pytest.raises(EnvironmentProblemError) as info:
        resolve_model(REPO)
    assert info.value.reference == "model-hub-gated"
    assert f"licence at {server.url}/{REPO}" in (info.value.hint or "")


def test_a_rejected_token_is_named(
    serve: Callable[[dict[str, Route]], HubServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    message = "Invalid credentials in Authorization header"
    serve({CONFIG_PATH: Route(401, b"", {"X-Error-Message": message})})
    monkeypatch.setenv("HF_TOKEN", "hf_expired")
    with pytest.raises(EnvironmentProblemError) as info:
        resolve_model(REPO)
    assert info.value.reference == "model-hub-gated"
    assert "rejected" in (info.value.hint or "")


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"<!doctype html><html><body>Sign in to the Wi-Fi</body></html>", "looks like HTML"),
        (b'{"model_type": "qwen2", ', "not valid JSON"),
        (b"[1, 2, 3]", "JSON object"),
        (b"\xff\xfe\x00garbage", "not UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ],
)
def test_garbage_body_is_corrupt_input_and_is_not_cached(
    serve: Callable[[dict[str, Route]], HubServer], tmp_path: Path, body: bytes, says: str
) -> None:
    serve({CONFIG_PATH: Route(200, body)})
    with pytest.raises(CorruptInputError, match=says) as info:
        resolve_model(REPO)
    assert info.value.reference == "config-not-json"
    assert REPO in info.value.message
    assert [p for p in _cached_files(tmp_path) if p.is_file()] == []


def test_an_oversized_answer_is_refused(
    serve: Callable[[dict[str, Route]], HubServer],
    qwen_config: bytes,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    serve({CONFIG_PATH: _config_route(qwen_config)})
    monkeypatch.setattr(hub, "MAX_CONFIG_BYTES", 100)
    with pytest.raises(CorruptInputError, match="larger than"):
        resolve_model(REPO)


def test_a_server_that_never_answers_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    hub_id = hub.parse_hub_id(REPO)
    assert hub_id is not None
    # The kernel completes the handshake into the backlog; nobody ever accepts or answers.
    with socket.create_server(("127.0.0.1", 0), backlog=4) as silent:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{silent.getsockname()[1]}")
        with pytest.raises(EnvironmentProblemError) as info:
            hub.fetch_config(hub_id, timeout=0.2)
    err = info.value
    assert err.reference == "model-hub-unreachable"
    assert "timed out" in err.message
    assert REPO in err.message and REPO in (err.hint or "")
    assert "config.json" in (err.hint or "")


def test_connection_refused_is_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]  # free now, closed (refusing) below
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    with pytest.raises(EnvironmentProblemError) as info:
        resolve_model(REPO)
    assert info.value.reference == "model-hub-unreachable"
    assert "refused" in info.value.message
    assert "pass the file's path" in (info.value.hint or "")


def test_dns_failure_is_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_dns(host: Any, *args: Any, **kwargs: Any) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.invalid")
    with pytest.raises(EnvironmentProblemError) as info:
        resolve_model(REPO)
    assert info.value.reference == "model-hub-unreachable"
    assert "name or service not known" in info.value.message
    assert "https://hub.invalid" in info.value.message


def test_a_hub_error_is_unreachable_and_other_statuses_name_the_code(
    serve: Callable[[dict[str, Route]], HubServer],
) -> None:
    serve(
        {
            CONFIG_PATH: Route(503, b"Service Unavailable"),
            "/Qwen/teapot/resolve/main/config.json": Route(418, b"I'm a teapot"),
        }
    )
    with pytest.raises(EnvironmentProblemError, match="HTTP 503") as info:
        resolve_model(REPO)
    assert info.value.reference == "model-hub-unreachable"
    with pytest.raises(EnvironmentProblemError, match="HTTP 418") as info:
        resolve_model("Qwen/teapot")
    assert info.value.reference == "model-hub-error"


def test_second_run_works_from_the_cache_with_the_server_gone(
    serve: Callable[[dict[str, Route]], HubServer], qwen_config: bytes, tmp_path: Path
) -> None:
    server = serve({CONFIG_PATH: _config_route(qwen_config)})
    first = resolve_model(REPO)
    server.stop()
    cached = tmp_path / "cache" / "hub" / f"127.0.0.1%3A{server.port}" / REPO / "main"
    assert sorted(p.name for p in cached.iterdir()) == ["config.json"]  # no temp file left
    assert (cached / "config.json").read_bytes() == qwen_config
    second = resolve_model(REPO)  # connection refused now: the cache answers
    assert second.total_parameters == first.total_parameters == QWEN_7B_PARAMETERS
    assert second.source == f"{cached / 'config.json'} (cached from {server.url}{CONFIG_PATH})"
    assert server.paths == [CONFIG_PATH]


def test_a_hub_error_falls_back_to_the_cache(
    serve: Callable[[dict[str, Route]], HubServer], qwen_config: bytes
) -> None:
    routes = {CONFIG_PATH: _config_route(qwen_config)}
    server = serve(routes)
    resolve_model(REPO)
    routes[CONFIG_PATH] = Route(502, b"Bad Gateway")
    assert resolve_model(REPO).total_parameters == QWEN_7B_PARAMETERS
    assert server.paths == [CONFIG_PATH, CONFIG_PATH]


def test_a_branch_is_fetched_again_and_a_commit_is_not(
    serve: Callable[[dict[str, Route]], HubServer], qwen_config: bytes
) -> None:
    at_commit = f"/{REPO}/resolve/{COMMIT}/config.json"
    server = serve({CONFIG_PATH: _config_route(qwen_config), at_commit: _config_route(qwen_config)})
    for _ in range(2):
        resolve_model(REPO)
        resolve_model(f"{REPO}@{COMMIT}")
    assert server.paths == [CONFIG_PATH, at_commit, CONFIG_PATH]


@pytest.mark.parametrize("variable", ["HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"])
def test_offline_mode_never_tries_the_network(
    serve: Callable[[dict[str, Route]], HubServer],
    qwen_config: bytes,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
) -> None:
    server = serve({CONFIG_PATH: _config_route(qwen_config)})
    monkeypatch.setenv(variable, "1")
    with pytest.raises(EnvironmentProblemError) as info:
        resolve_model(REPO)
    err = info.value
    assert err.reference == "model-hub-unreachable"
    assert "HF_HUB_OFFLINE" in err.message and REPO in err.message
    assert "HF_HUB_OFFLINE" in (err.hint or "") and REPO in (err.hint or "")
    assert server.paths == []
    monkeypatch.setenv(variable, "0")  # not a true value: online again, fills the cache
    resolve_model(REPO)
    monkeypatch.setenv(variable, "yes")
    assert resolve_model(REPO).total_parameters == QWEN_7B_PARAMETERS  # from the cache
    assert server.paths == [CONFIG_PATH]


def test_cache_location_follows_xdg_and_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert hub.cache_dir() == tmp_path / "cache"
    monkeypatch.delenv("GPUWARDEN_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub.cache_dir() == tmp_path / "xdg" / "gpuwarden"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # the XDG spec: ignore relative
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert hub.cache_dir() == tmp_path / "home" / ".cache" / "gpuwarden"
    hub_id = hub.parse_hub_id(f"{REPO}@refs/pr/3")
    assert hub_id is not None
    assert hub.cache_path("https://huggingface.co", hub_id) == (
        tmp_path / "home/.cache/gpuwarden/hub/huggingface.co" / REPO / "refs%2Fpr%2F3/config.json"
    )
    mirror = hub.cache_path("https://user:secret@Mirror.example:8443/hf", hub_id)
    assert mirror is not None
    assert mirror.relative_to(tmp_path / "home/.cache/gpuwarden/hub").parts[0] == (
        "mirror.example%3A8443%2Fhf"
    )


def test_an_unwritable_cache_does_not_stop_the_fetch(
    serve: Callable[[dict[str, Route]], HubServer],
    qwen_config: bytes,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("the cache dir cannot be created under a file")
    monkeypatch.setenv("GPUWARDEN_CACHE_DIR", str(blocker / "cache"))
    serve({CONFIG_PATH: _config_route(qwen_config)})
    assert resolve_model(REPO).total_parameters == QWEN_7B_PARAMETERS


@pytest.mark.parametrize(
    "text",
    ["a/b/c", "owner/bad--name", "owner/name.git", "-owner/name", "owner/name@", "owner/n@../x"],
)
def test_malformed_hub_ids_never_reach_the_network(
    serve: Callable[[dict[str, Route]], HubServer], text: str
) -> None:
    server = serve({})
    with pytest.raises(UnknownNameError) as info:
        resolve_model(text)
    assert info.value.reference == "unknown-model"
    assert "owner/name[@revision]" in (info.value.hint or "")
    assert server.paths == []


def test_parse_hub_id() -> None:
    assert hub.parse_hub_id("meta-llama/Llama-2-7b-hf") == hub.HubId("meta-llama/Llama-2-7b-hf")
    parsed = hub.parse_hub_id("Qwen/Qwen2.5-7B@refs/pr/1")
    assert parsed == hub.HubId("Qwen/Qwen2.5-7B", "refs/pr/1", revision_given=True)
    assert str(parsed) == "Qwen/Qwen2.5-7B@refs/pr/1"
    assert hub.parse_hub_id("gpt2") is None
    assert hub.parse_hub_id("owner/" + "x" * 97) is None


_ID_CHARACTERS = r"[A-Za-z0-9._/@ -]{1,40}"
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=60), st.from_regex(_ID_CHARACTERS, fullmatch=True)))
def test_any_text_is_a_hub_id_or_none(text: str) -> None:
    hub_id = hub.parse_hub_id(text)
    if hub_id is not None:
        assert hub.parse_hub_id(str(hub_id)) == hub_id
        prefix = f"{hub.DEFAULT_ENDPOINT}/{hub_id.repo_id}/resolve/"
        url = hub.config_url(hub.DEFAULT_ENDPOINT, hub_id)
        revision, _, name = url.removeprefix(prefix).partition("/")
        assert url.startswith(prefix) and name == "config.json"  # the revision is one segment
        assert revision and hub.split_url(url).hostname == "huggingface.co"


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=200),
        _JSON.map(lambda value: json.dumps(value).encode()),
        st.integers(1, 5000).map(lambda depth: b"[" * depth + b"]" * depth),
    )
)
def test_any_answer_is_a_config_or_config_not_json(body: bytes) -> None:
    hub_id = hub.HubId(REPO)
    url = hub.config_url(hub.DEFAULT_ENDPOINT, hub_id)
    problem: CorruptInputError | None = None
    try:
        config = hub._parse(body, url, hub_id, hub.DEFAULT_ENDPOINT)
    except CorruptInputError as error:
        problem = error
    if problem is None:
        assert isinstance(config, dict)
    else:
        assert problem.reference == "config-not-json" and url in problem.message


@pytest.mark.parametrize(
    "value", ["ftp://mirror.example/hf", "huggingface.co", "http://", "http://mirror:port"]
)
def test_a_bad_hf_endpoint_is_named(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("HF_ENDPOINT", value)
    with pytest.raises(EnvironmentProblemError) as info:
        resolve_model(REPO)
    assert info.value.reference == "hf-endpoint-invalid"
    assert "HF_ENDPOINT" in info.value.message


def test_the_answer_is_json_the_planner_can_read(
    serve: Callable[[dict[str, Route]], HubServer], qwen_config: bytes
) -> None:
    # What was fetched is the fixture byte for byte; the spec keeps it as raw_config.
    serve({CONFIG_PATH: _config_route(qwen_config)})
    assert resolve_model(REPO).raw_config == json.loads(qwen_config)


def test_a_token_no_http_header_can_carry_is_a_clear_error(
    serve: Callable[[dict[str, Route]], HubServer],
    qwen_config: bytes,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = serve({CONFIG_PATH: _config_route(qwen_config)})
    monkeypatch.setenv("HF_TOKEN", "hf_a\nb")
    with pytest.raises(EnvironmentProblemError) as info:
        resolve_model(REPO)
    assert info.value.reference == "hf-token-invalid"
    assert "hf_a" not in info.value.message  # the token itself is never printed
    assert server.paths == []


def _hf_download(root: Path, config: bytes, revision: str = "main", commit: str = COMMIT) -> Path:
    """What huggingface_hub leaves after downloading config.json (its documented cache layout:
    the blob under its hash, the snapshot a link to it, the ref naming the commit)."""
    repo = root / ("models--" + REPO.replace("/", "--"))
    blob = repo / "blobs" / "0123abcd"
    blob.parent.mkdir(parents=True)
    blob.write_bytes(config)
    ref = repo / "refs" / revision
    ref.parent.mkdir(parents=True, exist_ok=True)
    ref.write_text(commit)  # huggingface_hub writes the commit with no newline
    snapshot = repo / "snapshots" / commit / "config.json"
    snapshot.parent.mkdir(parents=True)
    snapshot.symlink_to(Path("../../blobs/0123abcd"))
    return snapshot


@pytest.mark.parametrize("variable", ["HF_HUB_CACHE", "HF_HOME"])
def test_offline_a_config_huggingface_hub_downloaded_answers(
    qwen_config: bytes, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, variable: str
) -> None:
    """A model transformers or `huggingface-cli download` fetched is planned offline, as
    AutoConfig reads it (it was "not in the catalog nor in the hub cache")."""
    root = tmp_path / "hf-home"
    _hf_download(root / "hub" if variable == "HF_HOME" else root, qwen_config)
    monkeypatch.setenv(variable, str(root))
    if variable == "HF_HOME":
        monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert resolve_model(REPO).total_parameters == QWEN_7B_PARAMETERS
    assert resolve_model(f"{REPO}@{COMMIT}").total_parameters == QWEN_7B_PARAMETERS


def test_a_revision_huggingface_hub_never_downloaded_is_still_refused_offline(
    qwen_config: bytes, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _hf_download(tmp_path / "hf-hub", qwen_config)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # a revision that would climb out of the repository's folder is not looked up at all
    assert hub.hf_cache_path(hub.HubId(REPO, "refs/../../../etc")) is None
    for revision in ("v2", f"{'b' * 40}"):
        with pytest.raises(EnvironmentProblemError) as info:
            resolve_model(f"{REPO}@{revision}")
        assert info.value.reference == "model-hub-unreachable"
        assert "huggingface_hub's cache" in (info.value.context or "") or "hf-hub" in (
            info.value.context or ""
        )


def test_a_damaged_ref_is_no_answer(
    qwen_config: bytes, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _hf_download(tmp_path / "hf-hub", qwen_config, commit=COMMIT)
    ref = tmp_path / "hf-hub" / ("models--" + REPO.replace("/", "--")) / "refs" / "main"
    for junk in ("", "not a commit", "x" * 10_000):
        ref.write_text(junk)
        assert hub.hf_cache_path(hub.HubId(REPO)) is None
