"""The numbers of real out-of-memory messages (tests/data/explain/oom_facts.jsonl, SOURCES.md):
every field of ``facts.oom`` in ``gpuwarden explain --json`` equals the value written down by hand
from the printed text (bytes, IEC units: 1 GiB = 2**30), and is null where the message does not
state it. A row names its text (``text``) or reuses one of another set by ``from`` + ``id``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuwarden.health.explain import explain_text
from gpuwarden.health.explain.oom_parse import read_oom
from gpuwarden.report.explain import oom_record
from tests.health.explain_sets import DATA

FIELDS = ("tried_bytes", "total_bytes", "allocated_bytes", "reserved_bytes", "free_bytes")


def _texts_of_other_sets() -> dict[tuple[str, str], str]:
    texts = {}
    for path in DATA.glob("*.jsonl"):
        if path.name == "oom_facts.jsonl":
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            example = json.loads(line)
            texts[path.stem, example["id"]] = example.get("error_text") or example["text"]
    return texts


def _rows() -> list[dict[str, Any]]:
    others = _texts_of_other_sets()
    rows = []
    for line in (DATA / "oom_facts.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if "text" not in row:
            row["text"] = others[row["from"], row["id"]]
        rows.append(row)
    return rows


ROWS = _rows()


def test_the_set_has_variety() -> None:
    assert 30 <= len(ROWS) <= 50
    assert len({row["id"] for row in ROWS}) == len(ROWS)
    assert len({row["family"] for row in ROWS}) >= 12
    new = [row for row in ROWS if "source_url" in row]
    assert len({row["source_url"] for row in new}) == len(new)


@pytest.mark.parametrize("row", ROWS, ids=[row["id"] for row in ROWS])
def test_every_number_is_the_printed_one(row: dict[str, Any]) -> None:
    record = oom_record(explain_text(row["text"]).oom)
    expected = row["expected"]
    if all(value is None for value in expected.values()) and record is None:
        return  # an OOM with no number in it (a serving engine's pool message)
    assert record is not None
    assert {field: record[field] for field in FIELDS} == expected


# What the cudaMallocAsync backend prints (c10/cuda/CUDAMallocAsyncAllocator.cpp), its fields
# drawn: each is read, whatever the column padding; text after the block is not read.
_SIZES = st.sampled_from(["0 bytes", "512.00 KiB", "20.00 MiB", "1.88 GiB", "15.99 GiB"])


@given(
    allocated=_SIZES,
    requested=_SIZES,
    limit=_SIZES,
    free=_SIZES,
    pad=st.sampled_from([" ", "     ", "\n", "\n  "]),
    tail=st.text(max_size=40),
)
def test_cuda_malloc_async_fields_are_read_in_any_layout(
    allocated: str, requested: str, limit: str, free: str, pad: str, tail: str
) -> None:
    text = (
        f"torch.OutOfMemoryError: Allocation on device 1 would exceed allowed memory. (out of "
        f"memory){pad}Currently allocated{pad}: {allocated}{pad}Requested{pad}: {requested}{pad}"
        f"Device limit{pad}: {limit}{pad}Free (according to CUDA): {free}{pad}PyTorch limit (set"
        f" by user-supplied memory fraction){pad}: 17179869184.00 GiB\n{tail}"
    )
    reading = read_oom(" ".join(text.split()))
    assert reading is not None
    facts = reading.facts
    assert facts.device == "GPU 1"
    assert facts.reserved_bytes is None  # this allocator keeps no cache
    assert (facts.tried_bytes, facts.total_bytes, facts.allocated_bytes, facts.free_bytes) == (
        _bytes(requested),
        _bytes(limit),
        _bytes(allocated),
        _bytes(free),
    )


def _bytes(printed: str) -> int:
    number, unit = printed.split()
    scale = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[unit]
    return round(float(number) * scale)
