"""``--exact`` with ``--checkpoint-wrapper``: the trace applies torch's
``apply_activation_checkpointing`` (``checkpoint_wrapper``, ``CheckpointImpl.NO_REENTRANT``) on each
decoder layer, as llama-recipes and accelerate do, and leaves transformers' own switch off, so the
training forward builds the KV cache the formula counts (``test_checkpoint_wrapper.py``).

The small Llama models of ``test_formula_vs_exact.py`` (a few hundred KB, a fraction of a second
per trace); what is compared, like with like: the bytes of the cache the forward's outputs hold
against the plan's forward-phase ``kv_cache``, and the saved activations (the block inputs only,
the cache is not saved inside a checkpointed block) against the plan's forward activations.
"""

from __future__ import annotations

import dataclasses

import pytest

from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner import plan_memory
from gpuwarden.types.plan import Attention, Checkpointing, Mode, PlanRequest
from tests.planner.saved_trace import formula_saved, traced_saved
from tests.planner.test_formula_vs_exact import TOLERANCE, make_request

pytestmark = pytest.mark.torch

BF16_BYTES = 2
BATCH, SEQ = 2, 48


@pytest.fixture(autouse=True, scope="module")
def _torch_extra() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")


def wrapped(family: str, mode: str = "bf16-sdpa") -> PlanRequest:
    """The small model, fully checkpointed by torch's wrapper, the config's use_cache on."""
    return dataclasses.replace(
        make_request(family, mode, BATCH, SEQ),
        checkpointing=Checkpointing.FULL,
        checkpoint_wrapper=True,
        use_cache=True,
    )


def traced_cache(request: PlanRequest) -> tuple[int, int]:
    """One training forward as exact mode builds and runs it: the bytes of the KV cache its
    outputs hold, and the layers whose cache is the K/V of ``seq_len`` tokens."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from gpuwarden.planner.exact import _build, _recipe, _run

    recipe = _recipe.resolve(request)
    with _build.quiet(), FakeTensorMode(), _build.fake_safe_masks(), _run.cuda_sdpa():
        built = _build.build(request, recipe)
        inputs = _run.training_inputs(built, request.micro_batch, request.seq_len)
        outputs = built.model(**inputs)
        cache = outputs.get("past_key_values")
        if cache is None:
            return 0, 0
        tensors = _run.cache_tensors(cache)
        full = sum(1 for t in tensors if t.shape[-2] == request.seq_len) // 2
        return _run.storage_bytes(tensors), full


def forward_kv_cache(request: PlanRequest) -> int:
    forward = next(p for p in plan_memory(request).phases if p.name == "forward")
    return forward.bytes_by_component.get("kv_cache", 0)


@pytest.mark.parametrize("family", ["llama", "llama-tied-gqa"])
def test_the_exact_trace_holds_the_kv_cache_the_formula_counts(family: str) -> None:
    request = wrapped(family)
    spec = request.model
    cache, layers = traced_cache(request)
    # every layer's K and V over the batch's tokens, in bf16
    expected = spec.num_layers * 2 * BATCH * SEQ * spec.kv_width * BF16_BYTES
    assert layers == spec.num_layers
    assert cache == expected
    assert forward_kv_cache(request) == cache


@pytest.mark.parametrize("family", ["llama", "llama-tied-gqa"])
def test_transformers_own_checkpointing_still_drops_the_cache(family: str) -> None:
    request = dataclasses.replace(wrapped(family), checkpoint_wrapper=False)
    assert traced_cache(request) == (0, 0)
    assert forward_kv_cache(request) == 0


@pytest.mark.parametrize("mode", ["bf16-sdpa", "lora-bf16"])
def test_the_wrapped_blocks_save_their_inputs_only(mode: str) -> None:
    """The cache is not a saved tensor: what autograd saves is what transformers' checkpointing
    saves, and the formula's forward activations match it within the issue's 2 %."""
    request = wrapped("llama", mode)
    if request.mode is Mode.LORA:
        pytest.importorskip("peft")
    exact = traced_saved(request)
    assert exact == traced_saved(dataclasses.replace(request, checkpoint_wrapper=False))
    formula = formula_saved(request)
    error = (formula - exact) / exact
    assert abs(error) <= TOLERANCE, f"formula {formula:,} B, exact {exact:,} B ({error:+.2%})"


def test_eager_attention_on_the_grown_cache_is_refused_with_the_reason() -> None:
    """The recomputation reruns the layer with the same cache, which grows to 2 × seq_len keys:
    eager attention's seq_len × seq_len mask no longer broadcasts (before: the trace failed on
    it, or, with transformers' switch, traced no cache at all)."""
    from gpuwarden.planner.exact import run_exact

    request = dataclasses.replace(wrapped("llama"), attention=Attention.EAGER)
    with pytest.raises(InvalidConfigError, match="use_cache on and eager attention"):
        run_exact(request)
    # without the cache, eager attention traces
    assert run_exact(dataclasses.replace(request, use_cache=False)).saved_activation_bytes > 0


def test_flash_attention_traces_and_says_what_a_cuda_run_meets() -> None:
    from gpuwarden.planner.exact import run_exact

    report = run_exact(dataclasses.replace(wrapped("llama"), attention=Attention.FLASH))
    assert any("transformers#28056" in note for note in report.notes)
    assert any("torch's apply_activation_checkpointing" in note for note in report.notes)
