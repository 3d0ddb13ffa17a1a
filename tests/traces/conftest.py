"""The two trace decoders: tests that take ``decoder`` (or mark a module with
``pytest.mark.usefixtures("decoder")``) run once with the simdjson scanner and once with msgspec."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from gpuwarden.traces import native

DECODERS = ["simdjson", "msgspec"]


@contextmanager
def decoder_env(value: str | None) -> Iterator[None]:
    """``GPUWARDEN_TRACE_DECODER`` set to ``value`` (None: unset) for the block, then restored;
    by hand, not monkeypatch, so that hypothesis tests can use it too."""
    before = os.environ.get(native.DECODER_ENV)
    if value is None:
        os.environ.pop(native.DECODER_ENV, None)
    else:
        os.environ[native.DECODER_ENV] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(native.DECODER_ENV, None)
        else:
            os.environ[native.DECODER_ENV] = before


@pytest.fixture(params=DECODERS)
def decoder(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "simdjson" and not native.SCANNER_BUILT:
        pytest.fail(
            "the simdjson scanner (gpuwarden.traces._kineto) is not built: install "
            "libsimdjson-dev and reinstall (bash scripts/install)"
        )
    with decoder_env(None if request.param == "simdjson" else "msgspec"):
        yield request.param
