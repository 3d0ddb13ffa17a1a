"""The two trace decoders: tests that take ``decoder`` (or mark a module with
``pytest.mark.usefixtures("decoder")``) run once with the simdjson scanner and once with msgspec."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from gpuwarden.traces import native

DECODERS = ["simdjson", "msgspec"]


@pytest.fixture(params=DECODERS)
def decoder(request: pytest.FixtureRequest) -> Iterator[str]:
    # os.environ by hand, not monkeypatch: hypothesis tests use this fixture too
    before = os.environ.get(native.DECODER_ENV)
    if request.param == "simdjson":
        if not native.SCANNER_BUILT:
            pytest.fail(
                "the simdjson scanner (gpuwarden.traces._kineto) is not built: install "
                "libsimdjson-dev and reinstall (bash scripts/install)"
            )
        os.environ.pop(native.DECODER_ENV, None)
    else:
        os.environ[native.DECODER_ENV] = "msgspec"
    try:
        yield request.param
    finally:
        if before is None:
            os.environ.pop(native.DECODER_ENV, None)
        else:
            os.environ[native.DECODER_ENV] = before
