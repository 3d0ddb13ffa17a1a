"""explain_text on the seventy-sixth held-out set (tests/data/explain/heldout76.jsonl, SOURCES.md,
notes/heldout76.md): GitHub issues and pull requests opened 2019-2026 of robot simulation and
autonomous-driving stacks on NVIDIA GPUs — Isaac Sim / Isaac Lab and Omniverse Kit apps,
NVIDIA-ISAAC-ROS, Autoware, Apollo (and the LGSVL simulator running it), openpilot, CARLA-based
stacks, Genesis, ManiSkill / SAPIEN and mujoco_warp (mjlab) — whose text holds a GPU error, every
in-frame text the issues corpus gave in its order, labelled from the thread before explain was
run on them.
30 texts: 12 labelled (cuda-graph-capture-unsupported 5, illegal-memory-access 2,
forward-compat-unsupported 2, gpu-arch-unsupported 2, driver-too-old 1), 18 `unknown` (SAPIEN's
and Kit's Vulkan initialisation, SAPIEN's missing cuda device, bare CUDA error numbers from Elbrus,
nvblox and TensorRT, Warp's entry-point and kernel-lookup failures, OmniGraph's renderer warning,
TensorFlow's cuInit and out-of-memory, Taichi's missing libcuda under WSL)."""

from __future__ import annotations

from tests.health.explain_sets import cause_readings, heldout_set_checks, load_set, sets_before

# Measured before any change: labelled 11/12 right (no answer 1/12: TensorRT's "Cuda Error in
# execute: 7" under Apollo 5.0 on an RTX 2070), unknown texts given a high cause 0/18. No change
# made: the one miss is not a wording that names its cause (below).
MIN_ACCURACY = 0.9
KNOWN_MISSES = {
    "lgsvl-apollo-5-rtx2070-tensorrt-cuda-error-execute-7-lg-268": (
        "the label is the thread's (Apollo 5.0's perception supports only GTX 1080-generation "
        "GPUs, the simulator's maintainer in #268 / #269); TensorRT's 'Cuda Error in execute: 7' "
        "carries only the runtime's number, whose name is cudaErrorLaunchOutOfResources, so a "
        "reading of the text itself would name a launch over its resources, not the GPU's "
        "architecture; no answer is the honest reading"
    ),
}

HELDOUT76 = load_set("heldout76")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT76,
    sets_before(76),
    size=(15, 30),
    min_unknown=18,
    min_causes=5,
    min_repositories=18,
    min_categories=25,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
)


def test_sapien_and_kit_vulkan_initialisation_failures_get_no_cause() -> None:
    # the Vulkan loader's ErrorInitializationFailed does not say whether the ICD, the driver or
    # the container is at fault: the threads settle none of them
    for text in (
        "RuntimeError: vk::Instance::enumeratePhysicalDevices: ErrorInitializationFailed",
        "RuntimeError: vk::PhysicalDevice::createDeviceUnique: ErrorInitializationFailed",
        "[Error] [carb.graphics-vulkan.plugin] VkResult: ERROR_INITIALIZATION_FAILED",
        'Failed to find a supported physical device "cuda:0"',
    ):
        assert cause_readings(text) == []
