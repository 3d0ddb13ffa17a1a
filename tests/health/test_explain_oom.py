"""Out-of-memory messages → numbers (OomFacts, bytes) → which OOM cause the arithmetic supports.

Every text is real: the fixture examples, the held-out set and tests/data/explain/
oom_wordings.jsonl (each line names its source). The expected numbers are the ones the message
prints, converted with binary units (PyTorch's format_size)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.health.explain import explain_text
from gpuwarden.health.explain.oom_parse import read_oom
from gpuwarden.health.explain.sizes import parse_size
from gpuwarden.health.explain.text import read_paste
from gpuwarden.types.health import Confidence

DATA = Path(__file__).resolve().parent.parent / "data" / "explain"
KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


def _g(x: float) -> int:
    return round(x * GIB)


def _m(x: float) -> int:
    return round(x * MIB)


def _text(source: Path, example_id: str) -> str:
    for line in source.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["id"] == example_id:
            return str(record.get("error_text") or record["text"])
    raise KeyError(example_id)


@pytest.fixture(scope="module")
def examples(fixtures: Path) -> Path:
    return fixtures / "errors" / "examples.jsonl"


def test_sizes_in_every_unit() -> None:
    assert parse_size("4.96 GiB") == _g(4.96)
    assert parse_size("731.17 MiB") == _m(731.17)
    assert parse_size("48.5KiB") == round(48.5 * KIB)
    assert parse_size("0 bytes") == 0
    assert parse_size("4770354232 bytes") == 4770354232
    assert parse_size("4.00 GibB") == 4 * GIB  # a typo users paste
    assert parse_size("16 GB") == 16 * 10**9  # decimal as written
    assert parse_size("1,024.00 MiB") == GIB
    assert parse_size("GiB") is None
    assert parse_size("9" * 400 + " GiB") is None  # beyond a float: no size
    assert parse_size("9" * 300 + " PiB") is None  # a float, but not once scaled


def test_pytorch_1x_reserved_wording(examples: Path) -> None:
    e = explain_text(_text(examples, "oom-pytorch-67971"))
    oom = e.oom
    assert oom is not None
    assert oom.framework == "pytorch"
    assert oom.device == "GPU 0"
    assert (oom.tried_bytes, oom.total_bytes) == (_m(2.00), _g(6.00))
    assert (oom.allocated_bytes, oom.reserved_bytes, oom.free_bytes) == (_g(4.88), _g(4.96), 0)
    top = e.diagnoses[0]
    assert top.cause == "oom-too-big"
    assert any("1.04 GiB held outside PyTorch ≈ a CUDA context" in line for line in top.evidence)


def test_pytorch_10_cached_wording_is_reserved_minus_allocated() -> None:
    """PyTorch ≤ 1.3 printed "X cached" = reserved − allocated (pytorch#13751)."""
    oom = read_oom(
        read_paste(_text(DATA / "oom_wordings.jsonl", "pytorch-1.0-cached-colab-867")).flat
    )
    assert oom is not None
    f = oom.facts
    assert (f.tried_bytes, f.total_bytes, f.free_bytes) == (_m(20.00), _g(11.17), _m(2.81))
    assert f.allocated_bytes == _g(10.67)
    assert f.reserved_bytes == _g(10.67) + _m(185.39)


def test_pytorch_21_typo_and_22_process_lines(examples: Path) -> None:
    # 2.1's "total capacty"
    typo = explain_text(
        _text(DATA / "heldout.jsonl", "oom-pytorch-request-bigger-than-gpu-neurolens-2")
    )
    assert typo.oom is not None
    assert (typo.oom.tried_bytes, typo.oom.total_bytes) == (_g(55.57), _g(12.00))
    assert typo.oom.reserved_bytes == _m(984.52) + _m(463.48)
    assert typo.diagnoses[0].cause == "oom-too-big"
    assert typo.diagnoses[0].confidence is Confidence.HIGH  # one request bigger than the GPU

    # 2.2+: "Process N has X" is another process when "this process has" is also printed
    zombie = explain_text(_text(examples, "oom-returnn-1649-zombie-proc"))
    f = zombie.oom
    assert f is not None
    assert f.other_processes == ((118636, _g(71.62)),)
    assert f.this_process_bytes == _g(21.24)
    assert f.reserved_bytes == _g(19.85) + _m(731.17)
    assert (f.total_bytes, f.free_bytes, f.tried_bytes) == (_g(93.00), _m(134.94), _m(290.00))
    assert zombie.diagnoses[0].cause == "oom-other-process"
    assert "process 118636 holds 71.62 GiB" in zombie.diagnoses[0].evidence[0]


def test_several_processes_and_the_container_pid() -> None:
    many = explain_text(
        _text(DATA / "oom_wordings.jsonl", "pytorch-2.2-multiple-processes-repo-file")
    )
    assert many.oom is not None
    assert [pid for pid, _ in many.oom.other_processes] == [
        644963,
        644977,
        2925282,
        3053273,
        3120922,
    ]
    assert many.diagnoses[0].cause == "oom-other-process"
    # no "this process has" line: NVML named this process by its host PID (a container)
    own = explain_text(_text(DATA / "oom_wordings.jsonl", "pytorch-2.x-container-pid-generateu-10"))
    assert own.oom is not None and own.oom.other_processes == ((20398, _g(14.52)),)
    assert "oom-other-process" not in {d.cause for d in own.diagnoses}
    assert own.diagnoses[0].cause == "oom-too-big"


def test_fragmentation_when_the_cache_holds_the_request() -> None:
    e = explain_text(_text(DATA / "oom_wordings.jsonl", "pytorch-2.1-cache-covers-request-lerf-73"))
    # 4.84 GiB reserved but unallocated ≥ 3.00 GiB tried, and 1.66 + 4.84 leaves 3.5 GiB over
    top = e.diagnoses[0]
    assert top.cause == "oom-fragmentation"
    assert top.confidence is Confidence.HIGH
    assert "4.84 GiB cached but unallocated ≥ 3.00 GiB tried" in top.evidence[0]
    # 20.81 GiB in the process − 16.93 GiB reserved: 3.88 GiB outside PyTorch's allocator
    assert "oom-framework-pool" in {d.cause for d in e.diagnoses}


def test_a_cache_too_small_for_the_request_is_not_fragmentation() -> None:
    e = explain_text(_text(DATA / "oom_wordings.jsonl", "pytorch-2.x-fragmented-cads-4"))
    # 22.78 GiB tried; 12.73 free + 9.35 cached = 22.08 GiB: short by 0.7 GiB either way
    assert e.diagnoses[0].cause == "oom-too-big"
    gpubench = explain_text(
        _text(DATA / "oom_wordings.jsonl", "pytorch-1.0-cached-wrapped-gpubench-1")
    )
    assert gpubench.oom is not None and gpubench.oom.reserved_bytes == _g(6.64) + _m(150.86)


def test_tensorflow_tensor_bytes_from_shape_and_dtype(examples: Path) -> None:
    e = explain_text(_text(examples, "oom-tf-textclass-4"))
    assert e.oom is not None and e.oom.framework == "tensorflow"
    assert e.oom.tried_bytes == 563354 * 256 * 4
    assert e.facts["tf_tensor_shape"] == "[563354,256]"
    assert e.diagnoses[0].cause == "oom-other-process"  # failed while creating variables
    azure = explain_text(_text(DATA / "oom_wordings.jsonl", "tf-bfc-allocator-azureml-880"))
    assert azure.oom is not None
    assert azure.oom.tried_bytes == 16 * 112 * 112 * 147 * 4
    assert azure.oom.device == "/job:localhost/replica:0/task:0/device:GPU:0"
    init = explain_text(_text(DATA / "oom_wordings.jsonl", "tf-initializer-fasterrcnn-110"))
    assert init.oom is not None and init.oom.tried_bytes == 25088 * 4096 * 4
    assert init.diagnoses[0].cause == "oom-other-process"
    # TensorFlow ≤ 1.4 printed no dtype: the shape is still read
    old = explain_text(_text(DATA / "heldout.jsonl", "oom-tf-old-wording-segan-42"))
    assert old.facts["tf_tensor_shape"] == "[100,4096,32]"
    assert old.oom is not None and old.oom.tried_bytes is None


def test_jax_buffer_assignment(examples: Path) -> None:
    e = explain_text(_text(examples, "oom-jax-afprofile-8"))
    assert e.oom is not None and e.oom.framework == "jax"
    assert e.oom.tried_bytes == 4770354232
    assert e.facts["xla_total_allocation_bytes"] == str(round(14.44 * GIB))
    assert e.diagnoses[0].cause == "oom-too-big"
    assert "14.44 GiB" in e.diagnoses[0].evidence[0]


def test_vllm_kv_cache_messages(examples: Path) -> None:
    e = explain_text(_text(examples, "oom-vllm-2418-kvcache"))
    assert e.facts["vllm_max_seq_len"] == "4096"
    assert e.facts["vllm_kv_cache_tokens"] == "3664"
    assert e.diagnoses[0].cause == "oom-kv-cache"
    v1 = explain_text(_text(DATA / "oom_wordings.jsonl", "vllm-v1-kv-needed-repo-file"))
    assert v1.facts["vllm_kv_needed_bytes"] == str(_g(0.28))
    assert v1.facts["vllm_kv_available_bytes"] == str(_g(0.17))
    assert v1.diagnoses[0].cause == "oom-kv-cache"
    startup = explain_text(_text(DATA / "oom_wordings.jsonl", "vllm-startup-free-memory-repo-file"))
    assert startup.oom is not None
    assert (startup.oom.free_bytes, startup.oom.total_bytes) == (_g(7.34), _g(15.49))
    assert startup.diagnoses[0].cause == "oom-other-process"


def test_a_host_oom_killer_line_is_not_a_gpu_oom(fixtures: Path) -> None:
    """The gpud dmesg fixture mixes an Xid burst with the kernel's OOM killer (host RAM)."""
    e = explain_text((fixtures / "xid" / "gpud__dmesg-decode-iso-xid13-43.log").read_text())
    assert e.oom is None
    assert not any(d.category == "oom" for d in e.diagnoses)


@settings(max_examples=100, deadline=None)
@given(
    tried=st.integers(1, 1 << 36),
    total=st.integers(1, 1 << 37),
    allocated=st.integers(0, 1 << 37),
    cached=st.integers(0, 1 << 34),
    free=st.integers(0, 1 << 36),
)
def test_arithmetic_never_breaks_on_any_numbers(
    tried: int, total: int, allocated: int, cached: int, free: int
) -> None:
    """The 1.x wording with arbitrary (even impossible) numbers: a ranked OOM verdict, no crash."""
    text = (
        f"RuntimeError: CUDA out of memory. Tried to allocate {tried} bytes (GPU 0; {total} bytes "
        f"total capacity; {allocated} bytes already allocated; {free} bytes free; "
        f"{allocated + cached} bytes reserved in total by PyTorch)"
    )
    e = explain_text(text)
    assert e.oom is not None and e.oom.tried_bytes == tried
    assert e.diagnoses and e.diagnoses[0].category == "oom"
    assert all(0 <= d.score <= 1 for d in e.diagnoses)
