"""huggingface_hub's cache read in place (catalog/hub.py ``hf_cache_path``): a mutated ref file or
snapshot config is refused with a GpuwardenError or read, never another exception.

The inputs are the real layout huggingface_hub writes (``refs/main`` holding the 40-hex commit,
``snapshots/<commit>/config.json``) with a real model config, bytes mutated."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.catalog import resolve_model
from gpuwarden.errors import GpuwardenError
from gpuwarden.types.model import ModelSpec
from tests.conftest import FIXTURES

CONFIG = (FIXTURES / "models" / "Llama-2-7b-hf.json").read_bytes()
COMMIT = "0123456789abcdef0123456789abcdef01234567"
REF = (COMMIT + "\n").encode()


@st.composite
def mutated(draw: st.DrawFn, real: bytes) -> bytes:
    """``real`` with a few bytes replaced, inserted or cut off."""
    data = bytearray(real)
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(data)))
        edit = draw(st.sampled_from(["replace", "insert", "truncate"]))
        if edit == "truncate":
            del data[at:]
        elif edit == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif at < len(data):
            data[at] = draw(st.integers(0, 255))
    return bytes(data)


def _plan_model_from(ref: bytes, config: bytes) -> ModelSpec | None:
    """The model the cache gives, or None when it is refused with a GpuwardenError."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        repo = root / "hf" / "models--meta--tiny"
        (repo / "refs").mkdir(parents=True)
        (repo / "refs" / "main").write_bytes(ref)
        (repo / "snapshots" / COMMIT).mkdir(parents=True)
        (repo / "snapshots" / COMMIT / "config.json").write_bytes(config)
        env = {
            "HF_HUB_OFFLINE": "1",
            "HF_HUB_CACHE": str(root / "hf"),
            "GPUWARDEN_CACHE_DIR": str(root / "own"),
        }
        with mock.patch.dict(os.environ, env):
            try:
                return resolve_model("meta/tiny")
            except GpuwardenError:
                return None  # refused, in words


def test_the_unmutated_cache_is_read() -> None:
    spec = _plan_model_from(REF, CONFIG)
    assert spec is not None
    assert spec.total_parameters > 0


@settings(max_examples=60, deadline=None)
@given(mutated(REF))
def test_a_mutated_ref_is_refused_or_read(ref: bytes) -> None:
    _plan_model_from(ref, CONFIG)


@settings(max_examples=60, deadline=None)
@given(mutated(CONFIG))
def test_a_mutated_snapshot_config_is_refused_or_read(config: bytes) -> None:
    _plan_model_from(REF, config)
