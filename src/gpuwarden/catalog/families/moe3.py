"""Large MoE model types whose layout ``ModelSpec`` cannot state, refused with the feature named.

Each was read from its transformers 5.24 modeling file; what it has that the planner's spec has no
field for would change the KV cache or the active parameters, so it is refused rather than
approximated:

- MiMo-V2-Flash (modeling_mimo_v2_flash.py, ``MiMoV2FlashAttention``): sliding-window blocks build
  twice the KV heads of the full-attention blocks (``num_key_value_heads * 2``), and values are
  ``v_head_dim`` (128) wide where keys are ``head_dim`` (192). ``ModelSpec`` has one KV head
  count and one head width for every block, so the KV cache would be wrong in every block.
- LongCat-Flash (modeling_longcat_flash.py): ``LongcatFlashMoE`` routes each token's top-k over
  ``n_routed_experts`` real experts plus ``zero_expert_num`` zero-computation (identity)
  experts, so the experts a token runs, and its active parameters, vary per token; each block
  (``LongcatFlashDecoderLayer``) holds two MLA sublayers and two dense MLPs with the MoE on a
  shortcut beside them. ``MoeSpec`` has a fixed top-k of real experts per MoE block.
"""

from __future__ import annotations

from gpuwarden.errors import InvalidConfigError

# model_type → the features the spec cannot state (the modeling classes that have them)
UNMODELLED: dict[str, str] = {
    "mimo_v2_flash": (
        "per-layer-type KV heads (its sliding-window blocks cache twice the KV heads of its "
        "full-attention blocks) and values narrower than keys (v_head_dim ≠ head_dim)"
    ),
    "longcat_flash": (
        "zero-computation (identity) experts in the top-k, so the active parameters vary per "
        "token, and shortcut-connected MoE blocks of two MLA sublayers each"
    ),
}


def unmodelled_refusal(model_type: str, source: str) -> InvalidConfigError | None:
    """The ``unsupported-architecture`` refusal of a type in ``UNMODELLED``, naming what the
    planner would get wrong; None for any other type."""
    features = UNMODELLED.get(model_type)
    if features is None:
        return None
    return InvalidConfigError(
        f"{source}: model_type {model_type!r} has {features}, which the formula planner does "
        "not model",
        reference="unsupported-architecture",
        hint="its KV cache or active parameters would be guessed; `--exact` traces any HF model",
    )
