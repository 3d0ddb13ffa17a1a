"""Logs pasted with a per-line prefix read as without it: docker compose's service prefix, the
CRI container log file line (with the runtime's partial lines, joined as kubelet joins them) and
``kubectl logs --prefix`` — every held-out text of every set and every fixture keeps its
diagnoses under each. And an OOM message that states some of the device's numbers says which in
its evidence (the README's first explain example)."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.health.explain import explain_text
from gpuwarden.health.explain.text import read_paste, strip_decorations
from gpuwarden.types.health import Confidence
from tests.conftest import FIXTURES

DATA = Path(__file__).resolve().parent.parent / "data" / "explain"
EXAMPLES = FIXTURES / "errors" / "examples.jsonl"
SETS = sorted(path.stem for path in DATA.glob("heldout*.jsonl"))

CRI_TIME = "2026-11-27T10:00:00.123456789Z"
# kubelet splits a line longer than its buffer (16 KiB) into P lines; a short width splits the
# held-out texts' lines often, inside words and numbers too
CRI_SPLIT_CHARS = 40

Reading = list[tuple[str, Confidence, float]]


def _each_line(prefix: str) -> Callable[[str], str]:
    return lambda text: "\n".join(prefix + line for line in text.split("\n"))


def _cri_split(text: str) -> str:
    """``text`` as a CRI log file holds it when the runtime splits each line every
    ``CRI_SPLIT_CHARS`` characters: P for every piece but the last, F for the last."""
    lines = []
    for line in text.split("\n"):
        pieces = [line[i : i + CRI_SPLIT_CHARS] for i in range(0, len(line), CRI_SPLIT_CHARS)]
        pieces = pieces or [""]
        lines += [f"{CRI_TIME} stderr P {piece}" for piece in pieces[:-1]]
        lines.append(f"{CRI_TIME} stderr F {pieces[-1]}")
    return "\n".join(lines)


PREFIXED = {
    "compose": _each_line("trainer-1  | "),
    "compose-v1": _each_line("project_trainer_1  | "),
    "cri": _each_line(f"{CRI_TIME} stdout F "),
    "cri-split": _cri_split,
    "kubectl": _each_line("[pod/trainer-0/pytorch] "),
}


@cache
def _texts(source: str) -> dict[str, str]:
    """id → pasted text of a held-out set, of the OOM wordings or of the fixtures
    (``examples``)."""
    path = EXAMPLES if source == "examples" else DATA / f"{source}.jsonl"
    rows = map(json.loads, path.read_text(encoding="utf-8").splitlines())
    return {row["id"]: row.get("error_text") or row["text"] for row in rows}


def _reading(text: str) -> Reading:
    return [(d.cause, d.confidence, d.score) for d in explain_text(text).diagnoses]


@cache
def _plain_readings(source: str) -> dict[str, Reading]:
    return {example_id: _reading(text) for example_id, text in _texts(source).items()}


@pytest.mark.parametrize("source", [*SETS, "oom_wordings", "examples"])
@pytest.mark.parametrize("kind", sorted(PREFIXED))
def test_every_text_reads_the_same_under_the_prefix(kind: str, source: str) -> None:
    plain = _plain_readings(source)
    changed = {
        example_id: (plain[example_id], reading)
        for example_id, text in _texts(source).items()
        if (reading := _reading(PREFIXED[kind](text))) != plain[example_id]
    }
    assert not changed


# The texts an audit found losing their cause under each prefix: each wraps its message over lines.
WRAPPED = [
    ("heldout2", "ver-ngc-container-driver-418-triton-1589", "driver-too-old", Confidence.HIGH),
    ("heldout", "ctr-shm-dataloader-fastai-21", "dataloader-shm", Confidence.HIGH),
    ("heldout", "oom-jax-no-prealloc-fragmentation-jax-788", "oom-framework-pool", Confidence.LOW),
    (
        "examples",
        "ctr-image-no-compute-cap-allennlp-697",
        "container-driver-capabilities",
        Confidence.MEDIUM,
    ),
]


@pytest.mark.parametrize("kind", sorted(PREFIXED))
@pytest.mark.parametrize(("source", "example_id", "cause", "confidence"), WRAPPED)
def test_a_wrapped_message_keeps_its_cause(
    kind: str, source: str, example_id: str, cause: str, confidence: Confidence
) -> None:
    top = explain_text(PREFIXED[kind](_texts(source)[example_id])).diagnoses[0]
    assert (top.cause, top.confidence) == (cause, confidence)


def test_a_cri_partial_line_joins_the_next_without_a_space() -> None:
    log = (
        f"{CRI_TIME} stderr P RuntimeError: CUDA error: an illegal mem\n"
        f"{CRI_TIME} stderr P ory access was encount\n"
        f"{CRI_TIME} stderr F ered\n"
        f"{CRI_TIME} stderr F CUDA kernel errors might be asynchronously reported"
    )
    assert read_paste(log).flat == (
        "RuntimeError: CUDA error: an illegal memory access was encountered "
        "CUDA kernel errors might be asynchronously reported"
    )
    assert explain_text(log).diagnoses[0].cause == "illegal-memory-access"


def test_a_partial_line_keeps_the_spaces_at_its_split() -> None:
    log = f"{CRI_TIME} stdout P Bus \n{CRI_TIME} stdout F  error"
    assert read_paste(log).raw == f"{CRI_TIME} stdout P Bus  error"


def test_a_partial_line_without_its_continuation_stays_a_line() -> None:
    log = f"{CRI_TIME} stdout P NCCL WARN Cuda failure 'out of memory'\nnot a CRI line"
    assert read_paste(log).flat == "NCCL WARN Cuda failure 'out of memory' not a CRI line"


@pytest.mark.parametrize(
    ("line", "content"),
    [
        # kubectl logs --prefix --timestamps, then torchrun's rank
        ("[pod/trainer-0/pytorch] 2026-11-27T10:00:00.1Z [rank0]: Xid 79", "Xid 79"),
        # docker compose logs -t: the timestamp after the service
        ("trainer-1  | 2026-11-27T10:00:00.123456789Z NCCL WARN", "NCCL WARN"),
        # the longest name is padded by one space only
        ("gpu-worker_12 | CUDA error", "CUDA error"),
        # the tags after the first, separated by ":", and a time zone offset
        ("2026-11-27T10:00:00.5+01:00 stderr F:x Segmentation fault", "Segmentation fault"),
        (f"{CRI_TIME} stdout F", ""),  # an empty line of the container
        ("[pod/trainer-0/] OOMKilled", "OOMKilled"),  # kubectl knew no container name
        ("[pod/trainer-0/pytorch]", ""),  # an empty line, its trailing space trimmed
        ("    trainer-1  | Killed", "Killed"),  # indented, as in a quoted paste
    ],
)
def test_the_container_prefixes_are_stripped(line: str, content: str) -> None:
    assert strip_decorations(line) == content


@pytest.mark.parametrize(
    ("line", "content"),
    [
        # a shell pipe is no compose prefix: a compose container's name ends in its replica
        ("dmesg | grep -i xid", "dmesg | grep -i xid"),
        ("nvidia-smi -q | grep -i retired", "nvidia-smi -q | grep -i retired"),
        # G is no CRI tag: only the ISO timestamp goes
        ("2026-11-27T10:00:00Z stdout G text", "stdout G text"),
        # a pod's path without kubectl's "pod/"
        ("[trainer-0/pytorch] text", "[trainer-0/pytorch] text"),
    ],
)
def test_a_line_like_a_prefix_keeps_its_text(line: str, content: str) -> None:
    assert strip_decorations(line) == content


# The README's first explain example: the message states the device's total and nothing else.
README_OOM = (
    "RuntimeError: CUDA out of memory. Tried to allocate 2.00 MiB (GPU 0; 6.00 GiB total "
    "capacity; ...)"
)


def test_the_oom_evidence_says_what_the_message_states() -> None:
    diagnoses = explain_text(README_OOM).diagnoses
    assert [d.evidence for d in diagnoses] == [
        (
            "tried to allocate 2.00 MiB; the message states total 6.00 GiB but not the "
            "allocated, reserved or free memory",
        )
    ] * 3


def test_the_oom_evidence_of_a_message_with_only_the_request() -> None:
    text = "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB"
    evidence = explain_text(text).diagnoses[0].evidence
    assert evidence == (
        "tried to allocate 20.00 MiB; the message does not state the device's numbers",
    )


def test_the_oom_evidence_names_each_number_stated() -> None:
    text = _texts("heldout36")["verl-llama32-3b-ppo-4x-a10-oom-verl-1141"]
    evidence = explain_text(text).diagnoses[0].evidence
    assert evidence == (
        "tried to allocate 98.00 MiB; the message states total 21.99 GiB, free 33.44 MiB but not "
        "the allocated or reserved memory",
    )


# lines a container log may hold: each prefix kind, a CRI line cut anywhere, near misses
_PREFIX_PIECES = st.sampled_from(
    [
        f"{CRI_TIME} stdout P ",
        f"{CRI_TIME} stderr F ",
        f"{CRI_TIME} stdout X ",
        "trainer-1  | ",
        "a_b_7 |",
        "[pod/p/c] ",
        "[pod//] ",
        "| ",
    ]
)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_any_prefixed_or_cut_paste_reads_without_error(data: st.DataObject) -> None:
    """Fixture texts under random mixes of prefixes, lines cut at any place, and random text:
    explain reads every one (a diagnosis or none), never an exception."""
    text = data.draw(st.sampled_from(sorted(_texts("examples").values())))
    lines = []
    for line in text.split("\n"):
        cut = data.draw(st.integers(0, len(line)))
        pieces = [line[:cut], line[cut:]] if data.draw(st.booleans()) else [line]
        lines += [data.draw(_PREFIX_PIECES) + piece for piece in pieces]
    lines.insert(data.draw(st.integers(0, len(lines))), data.draw(st.text(max_size=60)))
    for diagnosis in explain_text("\n".join(lines)).diagnoses:
        assert diagnosis.cause and diagnosis.confidence in set(Confidence)
