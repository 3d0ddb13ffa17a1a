"""explain_text on the forty-first held-out set (tests/data/explain/heldout41.jsonl, SOURCES.md):
an UNTHEMED sample in a frame sets 1-40 did not sample as one — every GPU error text that the
issues corpus gave, in its order, for generic GPU-error queries plus a tool's name over speech,
reinforcement-learning and robotics ML tools: the RVC WebUI (from its second result on),
so-vits-svc, Coqui TTS, Bark, NeMo's speech collections, ESPnet, Isaac Gym / Isaac Lab (Orbit),
MuJoCo (MJX, Playground, Warp) / Brax, stable-baselines3, LeRobot, Genesis, CleanRL, Unity
ML-Agents and OpenVLA / openpi. Much of what these tools print is a simulator's own word (PhysX's
"fail to launch kernel", Taichi's and Warp's CUDA driver calls) outside explain's vocabulary:
23 of the 38 texts are `unknown`.

What it showed: the fifteen labelled texts (PyTorch's, PhysX's and Omniverse's wordings of CUDA
errors 700, 702, 710, 716, 719 and no kernel image, torch.load's CUDA checkpoint, an OOM) read
right before any change; one unknown read a confident cause: JAX's "CUDA-enabled jaxlib is not
installed" printed after its installed CUDA plugin failed in initialize() read a CPU-only JAX."""

from __future__ import annotations

from gpuwarden.types.health import Confidence
from tests.health.explain_sets import (
    cause_readings,
    heldout_set_checks,
    load_set,
    never_raise,
    sets_before,
    text_of,
)

# Measured before any code change (the tree of 2026-11-27 10:07 UTC): labelled 15/15 right,
# unknown texts given a high cause 1/23 (MuJoCo Playground#137, below), labelled texts given no
# answer at all 0/15. After the change in SOURCES.md: 15/15, 0/23, 0/15; none of the 2,160
# earlier diagnoses (1,767 texts) changed.
MIN_ACCURACY = 0.9
KNOWN_MISSES: dict[str, str] = {}
KNOWN_FALSE_CONFIDENCE: dict[str, str] = {}

HELDOUT41 = load_set("heldout41")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT41,
    sets_before(41),
    size=(30, 45),
    min_unknown=20,
    min_causes=6,
    min_repositories=15,
    min_categories=20,
    known_misses=KNOWN_MISSES,
    known_false_confidence=KNOWN_FALSE_CONFIDENCE,
    min_accuracy=MIN_ACCURACY,
)

_MUJOCO_PLAYGROUND_137 = "mujoco-playground-jax-cuda12-plugin-unable-to-load-cusparse-mjp-137"
_JAX_NOT_INSTALLED = (
    "WARNING:2025-06-06 20:45:54,562:jax._src.xla_bridge:791: An NVIDIA GPU may be present on "
    "this machine, but a CUDA-enabled jaxlib is not installed. Falling back to cpu."
)


def test_jax_cpu_fallback_after_its_cuda_plugin_failed_is_not_a_cpu_only_jax() -> None:
    # the plugin's initialize() raised (jax_plugins/xla_cuda12 in the traceback): the plugin is
    # installed, so the fallback line is the failure's consequence and names no CPU-only build
    assert "cpu-only-build" not in dict(cause_readings(text_of(HELDOUT41, _MUJOCO_PLAYGROUND_137)))
    # xla_bridge's own log of that failure, in newer JAX releases
    logged = (
        "ERROR:jax._src.xla_bridge:Jax plugin configuration error: Exception when calling "
        "jax_plugins.xla_cuda13.initialize()\n" + _JAX_NOT_INSTALLED
    )
    assert "cpu-only-build" not in dict(cause_readings(logged))


def test_jax_cpu_fallback_alone_still_reads_a_cpu_only_jax() -> None:
    assert cause_readings(_JAX_NOT_INSTALLED)[0] == ("cpu-only-build", Confidence.HIGH)


def test_simulator_kernel_launch_failures_read_nothing() -> None:
    # PhysX's own "fail to launch kernel" (Isaac Gym, Isaac Lab) names no CUDA error: explain
    # names no cause for it (and says what to capture)
    for example_id in (
        "isaacgymenvs-physx-gpu-solver-fail-to-launch-kernel-ige-79",
        "isaaclab-physx-convexcoreconvexnphase-kernel-fail-to-launch-il-2423",
    ):
        assert cause_readings(text_of(HELDOUT41, example_id)) == []


test_the_new_readings_never_raise = never_raise(
    [
        "Jax plugin configuration error",
        "jax_plugins/xla_cuda12/__init__.py",
        "jax_plugins.xla_cuda13.initialize()",
        "CUDA-enabled jaxlib is not installed",
        "Unable to load cuSPARSE. Is it installed?",
        "Falling back to cpu.",
    ]
)
