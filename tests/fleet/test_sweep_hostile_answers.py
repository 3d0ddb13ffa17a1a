"""`gpuwarden fleet report` behind a stand-in server that damages the real Prometheus' answers:
well-formed API documents holding absurd numbers, and API errors of many kilobytes.

The promise checked: never exit 70 nor a traceback; with --json a strict JSON document (no
NaN/Infinity) on stdout, or the error document on stderr; an error quotes a bounded excerpt.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.cli.main import main
from gpuwarden.fleet.prometheus import AnswerError, parse_answer

WINDOW = ["--start", "2024-01-01T00:00:00Z", "--end", "2024-01-02T00:00:00Z"]
LAB = ["--selector", 'cluster="lab"']
# What a broken exporter, a bad recording rule or a hostile server can put in a sample value.
ABSURD_VALUES = ("NaN", "+Inf", "-Inf", "1e308", "-1e308", "1e20", "-1", "4294967295")
# Words that pick one family's queries (the query text names its metric).
FAMILIES = ("ECC", "XID", "POWER", "TEMP", "SM_ACTIVE", "REMAP", "RETIRED", "count_over_time")

# (the request's path, its form, the upstream status and body) -> (status, body) to send
Damage = Callable[[str, dict[str, str], int, bytes], tuple[int, bytes]]


class _Proxy(BaseHTTPRequestHandler):
    upstream = ""
    damage: Damage = staticmethod(lambda path, form, status, body: (status, body))

    def log_message(self, *args: Any) -> None:  # quiet: pytest shows failures
        pass

    def do_POST(self) -> None:
        sent = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        form = {k: v[0] for k, v in urllib.parse.parse_qs(sent.decode()).items()}
        forwarded = urllib.request.Request(
            self.upstream + self.path,
            data=sent,
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        try:
            with urllib.request.urlopen(forwarded, timeout=30) as answer:
                status, body = answer.status, answer.read()
        except urllib.error.HTTPError as failed:
            status, body = failed.code, failed.read()
        status, body = type(self).damage(self.path, form, status, body)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def proxy(prometheus_url: str) -> Iterator[type[_Proxy]]:
    """A stand-in server on 127.0.0.1 forwarding to the session's Prometheus; a test sets its
    ``damage`` and reads its ``url``."""
    handler = type("Proxy", (_Proxy,), {"upstream": prometheus_url})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    handler.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    try:
        yield handler
    finally:
        server.shutdown()
        server.server_close()


def _values_set_to(value: str, word: str) -> Damage:
    """Every sample value of the answers to the queries naming ``word`` becomes ``value``."""

    def damage(path: str, form: dict[str, str], status: int, body: bytes) -> tuple[int, bytes]:
        if word not in form.get("query", ""):
            return status, body
        document = json.loads(body)
        for element in document.get("data", {}).get("result", []):
            for point in [element.get("value"), *element.get("values", [])]:
                if point:
                    point[1] = value
        return status, json.dumps(document).encode()

    return damage


def _strict_json(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def _report(
    proxy: type[_Proxy], damage: Damage, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    proxy.damage = staticmethod(damage)  # type: ignore[assignment]
    code = main(["fleet", "report", "--prometheus", proxy.url, *WINDOW, *LAB, "--json"])  # type: ignore[attr-defined]
    out, err = capsys.readouterr()
    return code, out, err


def test_a_counter_step_beyond_64_bits_is_no_event(
    proxy: type[_Proxy], capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ECC steps of 1e308 summed to infinity and round() raised (exit 70)."""
    code, out, err = _report(proxy, _values_set_to("1e308", "ECC"), capsys)
    assert code == 0, err
    document = _strict_json(out)
    ecc = [f for f in document["findings"] if "ecc" in f["code"]]
    assert all(e["value"] < 1e308 for f in ecc for e in f.get("evidence", [])), ecc


def test_an_xid_code_beyond_64_bits_is_no_event(
    proxy: type[_Proxy], capsys: pytest.CaptureFixture[str]
) -> None:
    """The last-Xid gauge holding 1e308: no 309-digit Xid in the findings."""
    code, out, err = _report(proxy, _values_set_to("1e308", "XID"), capsys)
    assert code == 0, err
    xids = [f.get("xid") for f in _strict_json(out)["findings"] if f.get("xid") is not None]
    assert all(x < 2**64 for x in xids), xids


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.sampled_from(ABSURD_VALUES), st.sampled_from(FAMILIES))
def test_absurd_values_never_break_the_report(
    proxy: type[_Proxy], capsys: pytest.CaptureFixture[str], value: str, word: str
) -> None:
    code, out, err = _report(proxy, _values_set_to(value, word), capsys)
    assert code in {0, 2}, err
    if code == 0:
        _strict_json(out)
    else:  # NaN counts: the probes find no GPU; the error document names it
        assert _strict_json(err[err.index("{") :])["reference"] == "fleet-no-gpu-series"


def test_a_server_error_of_many_kilobytes_is_quoted_short(
    proxy: type[_Proxy], capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the whole 100 kB error text went into the message."""
    error = {"status": "error", "errorType": "execution", "error": "too many samples " * 6000}

    def refuse(path: str, form: dict[str, str], status: int, body: bytes) -> tuple[int, bytes]:
        return 422, json.dumps(error).encode()

    code, _, err = _report(proxy, refuse, capsys)
    document = _strict_json(err[err.index("{") :])
    assert (code, document["reference"]) == (4, "prometheus-query-failed")
    assert "too many samples" in document["message"] and len(document["message"]) < 1000
    assert "(101,999 characters)" in document["message"]


def test_a_result_that_is_not_a_list_says_so() -> None:
    """Before: "the answer holds a 'vector', not a vector"."""
    body = b'{"status":"success","data":{"resultType":"vector","result":{}}}'
    with pytest.raises(AnswerError, match="the vector's result is dict, not a list"):
        parse_answer(body, "vector")


@pytest.mark.parametrize("timeout", ["1e308", "86401"])
def test_a_timeout_beyond_a_day_is_refused(
    capsys: pytest.CaptureFixture[str], timeout: str
) -> None:
    """Before: 1e308 passed the check and overflowed the socket's deadline (exit 70)."""
    code = main(
        ["fleet", "report", "--prometheus", "http://127.0.0.1:9", "--range", "1h", "--json",
         "--timeout", timeout]
    )  # fmt: skip
    error = _strict_json(capsys.readouterr().err)
    assert (code, error["reference"]) == (2, "invalid-argument") and "--timeout" in error["message"]


@pytest.mark.parametrize("prices", [[], ["--price-per-gpu-hour", "2"], ["--prices", "FILE"]])
def test_an_energy_price_beyond_the_price_check_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, prices: list[str]
) -> None:
    """Before: --price-per-gpu-hour 1e6 was refused as a typo, --price-per-kwh 1e6 priced the
    energy (1e308: dollars of infinity, dropped from the JSON)."""
    contract = tmp_path / "contract.toml"
    contract.write_text("default_usd_per_gpu_hour = 2.0\nusd_per_kwh = 0.12\n")
    prices = [str(contract) if p == "FILE" else p for p in prices]
    code = main(
        ["fleet", "report", "--prometheus", "http://127.0.0.1:9", "--range", "1h", "--json",
         *prices, "--price-per-kwh", "1e6"]
    )  # fmt: skip
    error = _strict_json(capsys.readouterr().err)
    assert (code, error["reference"]) == (2, "fleet-price-invalid")
    assert "--price-per-kwh" in error["message"]


def test_a_url_with_a_password_is_refused_without_printing_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before: urllib took 'admin:s3cret@127.0.0.1' for a host name ('name or service not
    known' after four tries), and every line of the error printed the password."""
    url = "http://admin:s3cret@127.0.0.1:9"
    code = main(["fleet", "report", "--prometheus", url, "--range", "1h", "--json"])
    err = capsys.readouterr().err
    error = _strict_json(err)
    assert (code, error["reference"]) == (2, "fleet-prometheus-url")
    assert "s3cret" not in err and "http://***@127.0.0.1:9" in error["message"]
