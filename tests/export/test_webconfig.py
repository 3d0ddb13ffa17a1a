"""TLS and basic authentication from Prometheus' web configuration file: the format as
exporter-toolkit documents it, what is refused and why, and a running exporter behind it
(certificates made here with the ``cryptography`` package; bcrypt hashes with ``bcrypt``)."""

from __future__ import annotations

import base64
import datetime
import http.client
import ipaddress
import ssl
from pathlib import Path

import bcrypt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.export.helpers import run_export, serving

from gpuwarden.errors import GpuwardenError, InputError
from gpuwarden.export.webconfig import (
    BasicAuth,
    WebConfigSource,
    parse_web_config,
    read_web_config,
    tls_context,
)

TLS = "tls_server_config:\n  cert_file: a\n  key_file: b\n"
PASSWORD = b"s3cret-scraper"
HASH = bcrypt.hashpw(PASSWORD, bcrypt.gensalt(4)).decode()  # cost 4: fast tests, same format


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _cert(subject: str, key, issuer_key=None, issuer: str | None = None, *, ca: bool = False):
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer or subject)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    return builder.sign(issuer_key or key, hashes.SHA256())


def _write(folder: Path, name: str, cert, key=None) -> None:
    (folder / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    if key is not None:
        (folder / f"{name}.key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    """server.crt/key (self-signed for localhost/127.0.0.1), ca.crt, client.crt/key (CA-signed)."""
    server_key = _key()
    _write(tmp_path, "server", _cert("localhost", server_key), server_key)
    ca_key, client_key = _key(), _key()
    _write(tmp_path, "ca", _cert("test-ca", ca_key, ca=True))
    _write(tmp_path, "client", _cert("prometheus", client_key, ca_key, "test-ca"), client_key)
    return tmp_path


def config(folder: Path, text: str) -> Path:
    path = folder / "web.yml"
    path.write_text(text)
    return path


# --- the format ----------------------------------------------------------------------------------


def test_the_documented_example_loads_with_paths_relative_to_the_file(pki):
    path = config(pki, f"tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                       f"basic_auth_users:\n  prometheus: {HASH}\n")  # fmt: skip
    web = read_web_config(str(path))
    assert web.tls is not None and web.tls.cert_file == pki / "server.crt"
    assert web.users == {"prometheus": HASH.encode()}
    context = tls_context(web)
    assert context is not None and context.minimum_version is ssl.TLSVersion.TLSv1_2


def test_an_empty_file_means_no_tls_and_no_authentication(tmp_path):
    web = read_web_config(str(config(tmp_path, "")))
    assert web.tls is None and web.users is None


@pytest.mark.parametrize(
    ("text", "reference", "says"),
    [
        (f"{TLS}  cipher_suites: [TLS_AES_128_GCM_SHA256]\n", "web-config-unsupported",
         "cipher_suites"),
        ("rate_limit:\n  interval: 1s\n  burst: 20\n", "web-config-unsupported", "rate_limit"),
        (f"{TLS}  client_auth_type: RequireAnyClientCert\n  client_ca_file: ca.crt\n",
         "web-config-unsupported", "unverified"),
        (f"{TLS}  client_ca_file: ca.crt\n", "web-config-invalid", "client CA"),
        ("tls_server_config:\n  cert_file: a\n", "web-config-invalid", "certificate and its key"),
        (f"{TLS}  cert: x\n", "web-config-invalid", "both"),
        (f"{TLS}  min_version: SSL3\n", "web-config-invalid", "min_version"),
        ("basic_auth_users:\n  prometheus: hunter2\n", "web-config-invalid", "not a bcrypt hash"),
        ("basic_auth_user:\n  prometheus: x\n", "web-config-invalid", "unknown key"),
        ("http_server_config:\n  headers:\n    X-Frame-Options: allow-all\n", "web-config-invalid",
         "deny, sameorigin"),
        ("tls_server_config: [\n", "web-config-invalid", "not valid YAML (line"),
        ("- just\n- a list\n", "web-config-invalid", "mapping"),
    ],
)  # fmt: skip
def test_what_cannot_be_honoured_is_refused_with_a_reference(tmp_path, text, reference, says):
    with pytest.raises(InputError) as caught:
        read_web_config(str(config(tmp_path, text)))
    assert caught.value.reference == reference
    assert says in caught.value.message
    assert str(tmp_path / "web.yml") in caught.value.message
    assert caught.value.hint


def test_a_key_that_does_not_match_its_certificate_fails_at_start(pki):
    other = _key()
    _write(pki, "other", _cert("localhost", other), other)
    path = config(pki, "tls_server_config:\n  cert_file: server.crt\n  key_file: other.key\n")
    with pytest.raises(InputError) as caught:
        read_web_config(str(path))
    assert caught.value.reference == "web-config-tls"


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(InputError) as caught:
        read_web_config(str(tmp_path / "absent.yml"))
    assert caught.value.reference == "web-config-unreadable"


@given(st.text(max_size=200))
@settings(max_examples=150, deadline=None)
def test_any_text_is_a_config_or_a_clear_error(text):
    try:
        parse_web_config(text, "fuzz.yml", Path("/nonexistent"))
    except GpuwardenError as exc:
        reference = exc.reference
    else:
        reference = "web-config-ok"
    assert reference.startswith("web-config-")


# --- basic authentication ------------------------------------------------------------------------


def _basic(user: str, password: bytes) -> str:
    return "Basic " + base64.b64encode(user.encode() + b":" + password).decode()


def test_basic_auth_checks_bcrypt_hashes_and_nothing_else():
    auth = BasicAuth({"prometheus": HASH.encode(), "old": ("$2y$" + HASH[4:]).encode()})
    assert auth.check(_basic("prometheus", PASSWORD))
    assert auth.check(_basic("prometheus", PASSWORD))  # remembered: no second bcrypt
    assert auth.check(_basic("old", PASSWORD))  # htpasswd's $2y$ spelling
    assert not auth.check(_basic("prometheus", b"wrong"))
    assert not auth.check(_basic("nobody", PASSWORD))
    for header in (
        None,
        "",
        "Bearer abc",
        "Basic !!!",
        "Basic " + base64.b64encode(b"no-colon").decode(),
    ):
        assert not auth.check(header)


@given(
    st.one_of(
        st.text(max_size=80),
        st.builds(lambda raw: "Basic " + base64.b64encode(raw).decode(), st.binary(max_size=80)),
    )
)
@settings(max_examples=60, deadline=None)
def test_any_authorization_header_is_refused_never_a_crash(header):
    auth = BasicAuth({"prometheus": HASH.encode()})
    assert auth.check(header) is False


def test_a_changed_file_is_reloaded_and_a_broken_change_keeps_the_last_good(tmp_path):
    clock = [0.0]
    path = config(tmp_path, f"basic_auth_users:\n  a: {HASH}\n")
    source = WebConfigSource(str(path), clock=lambda: clock[0])
    assert set(source.current().config.users or {}) == {"a"}
    path.write_text(f"basic_auth_users:\n  b: {HASH}\n  c: {HASH}\n")
    clock[0] += 2.0
    assert set(source.current().config.users or {}) == {"b", "c"}
    path.write_text("basic_auth_users: [broken\n")
    clock[0] += 2.0
    assert set(source.current().config.users or {}) == {"b", "c"}
    assert source.reload_errors == 1


# --- a running exporter behind TLS and basic auth ------------------------------------------------


def _get(port: int, context: ssl.SSLContext, authorization: str | None) -> tuple[int, bytes, dict]:
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    try:
        headers = {"Authorization": authorization} if authorization else {}
        connection.request("GET", "/metrics", headers=headers)
        response = connection.getresponse()
        return response.status, response.read(), dict(response.getheaders())
    finally:
        connection.close()


def test_tls_and_basic_auth_on_a_running_exporter(pki):
    path = config(pki, f"tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                       f"basic_auth_users:\n  prometheus: {HASH}\n")  # fmt: skip
    trust = ssl.create_default_context(cafile=str(pki / "server.crt"))
    with serving("--backend", "sim", "--gpus", "1", "--web-config-file", str(path)) as running:
        assert running.url.startswith("https://")
        status, body, headers = _get(running.port, trust, None)
        assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
        assert _get(running.port, trust, _basic("prometheus", b"wrong"))[0] == 401
        status, body, _ = _get(running.port, trust, _basic("prometheus", PASSWORD))
        assert status == 200 and b"DCGM_FI_DEV_GPU_TEMP{" in body
        assert _plain_http_gets_no_metrics(running.port)


def _plain_http_gets_no_metrics(port: int) -> bool:
    plain = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        plain.request("GET", "/metrics")
        answer = plain.getresponse()
        return answer.status != 200 or b"DCGM_FI" not in answer.read()
    except (ConnectionError, http.client.HTTPException, OSError):
        return True
    finally:
        plain.close()


def test_client_certificates_are_required_and_verified(pki):
    path = config(
        pki,
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
        "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n",
    )
    with serving("--backend", "sim", "--gpus", "1", "--web-config-file", str(path)) as running:
        anonymous = ssl.create_default_context(cafile=str(pki / "server.crt"))
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            _get(running.port, anonymous, None)
        known = ssl.create_default_context(cafile=str(pki / "server.crt"))
        known.load_cert_chain(pki / "client.crt", pki / "client.key")
        assert _get(running.port, known, None)[0] == 200


def test_a_bad_web_config_stops_the_command_with_exit_2(tmp_path):
    path = config(tmp_path, "basic_auth_users:\n  prometheus: plaintext-password\n")
    result = run_export("--backend", "sim", "--web-config-file", str(path), "--once")
    assert result.returncode == 2
    assert "error: web-config-invalid" in result.stderr and "Traceback" not in result.stderr
