"""explain_text on the hundred-and-thirty-second held-out set (tests/data/explain/heldout132.jsonl,
SOURCES.md, notes/heldout132.md): GitHub issues and pull requests opened 2019-2026 in
conda-forge's feedstocks of the GPU stack (pytorch-cpu-feedstock, jaxlib-feedstock,
tensorflow-feedstock and cudatoolkit-dev-feedstock were the ones the searches gave) whose text
holds a GPU error's own words, every in-frame text the issues corpus gave in its order, labelled
from the thread before explain was run on them. 10 texts: 2 labelled (extension-build-toolkit:
XLA's warnings that it cannot run ptxas and finds no libdevice directory), 8 `unknown` (libcuda.so.1
missing at import, on a CI machine and beside a loaded 460 module, numba's "CUDA driver library
cannot be found", libcublas.so.12 not loaded, jaxlib's cuFFT that cannot be loaded, a cuDNN
handle's internal error, "No CUDA GPUs are available" in a GPU test run, and PyTorch's sm_120
warning for a build that carries PTX for compute_90)."""

from __future__ import annotations

import pytest

from gpuwarden.health.explain import build_toolkit, ptx_jit
from gpuwarden.types.health import Confidence
from tests.health.explain_sets import (
    cause_readings,
    diagnoses_of,
    heldout_set_checks,
    load_set,
    match_after_repeated_prefixes,
    never_raise,
    sets_before,
    text_of,
    top_reading,
)

# Measured before any change (/tmp/h303/measure.py): labelled 0/2 right (both no diagnosis),
# unknown texts given a high cause 2/8 (the sm_120 warning of a build with PTX for compute_90
# read gpu-arch-unsupported, a test's expected 'CUDA error: device-side assert triggered' quoted
# in its AssertionError read device-assert). After build_toolkit.py reads XLA's two warnings
# (no libdevice directory, a ptxas it cannot invoke) and ptx_jit.py caps PyTorch's warning when
# the build's PTX runs on the GPU: labelled 2/2 right, unknown read high 1/8; every earlier
# diagnosis dumped before and after (4,029 texts): 5 diffs, this set's three rows and two
# earlier `unknown` rows holding XLA's libdevice warning (sets 42 and 125), each no answer ->
# extension-build-toolkit (medium).
MIN_ACCURACY = 2 / 2
KNOWN_MISSES: dict[str, str] = {}
KNOWN_FALSE_CONFIDENCE: dict[str, str] = {
    "pytorch-cpu-feedstock-gpu-ci-test-nn-cuda-assert-test-no-cuda-gpus-are-available-pr-318": (
        "the device-side assert the test expected, quoted in its AssertionError as 'not found', "
        "is read as one that happened"
    ),
}

HELDOUT132 = load_set("heldout132")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT132,
    sets_before(132),
    size=(10, 10),
    min_unknown=8,
    min_causes=1,
    min_repositories=4,
    min_categories=10,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
    known_false_confidence=KNOWN_FALSE_CONFIDENCE,
)

PTXAS = "tensorflow-feedstock-2-11-rtx-2080-ti-xla-couldnt-invoke-ptxas-version-296"
LIBDEVICE = "tensorflow-feedstock-2-18-title-cant-find-libdevice-directory-cuda-dir-nvvm-420"
SM120_PTX = "pytorch-cpu-feedstock-cuda-12-6-rtx-50x0-sm-120-not-compatible-ptx-compute-90-390"
TOOLKIT = "extension-build-toolkit"
ARCH = "gpu-arch-unsupported"

# XLA's wordings (build_toolkit.py's docstring): WarnIfBadPtxasVersion's warning with
# GetPtxasVersionString's status, GetLibdeviceDir's warning, the driver fallback it announces
_NO_PTXAS = (
    "W asm_compiler.cc:80] Couldn't get ptxas version string: {status}: Couldn't invoke "
    "{ptxas} --version"
)
_NO_LIBDEVICE = (
    "W nvptx_compiler.cc:70] Can't find libdevice directory ${CUDA_DIR}/nvvm/libdevice. This may "
    "result in compilation or runtime failures, if the program we try to run uses routines from "
    "libdevice."
)
_FALLBACK = "Relying on driver to perform ptx compilation."


def _torch_warning(sm: str, archs: str) -> str:
    """PyTorch's incompatible_device_warn (torch/cuda/__init__.py, _check_cubins) for one GPU."""
    return (
        f"UserWarning: \nNVIDIA GeForce RTX 5090 with CUDA capability {sm} is not compatible "
        "with the current PyTorch installation.\nThe current PyTorch install supports CUDA "
        f"capabilities {archs}.\nIf you want to use the NVIDIA GeForce RTX 5090 GPU with "
        "PyTorch, please check the instructions at https://pytorch.org/get-started/locally/"
    )


def test_the_calibration_rows_read_as_their_wordings_say() -> None:
    # XLA's warnings read the usual way (medium), below the failures that follow them
    for example_id in (PTXAS, LIBDEVICE):
        assert top_reading(HELDOUT132, example_id) == (TOOLKIT, Confidence.MEDIUM)
        assert diagnoses_of(HELDOUT132, example_id)[0].decides
    # high before; the build's PTX for compute_90 runs on sm_120: one low candidate, saying why
    assert cause_readings(text_of(HELDOUT132, SM120_PTX)) == [(ARCH, Confidence.LOW)]
    capped = diagnoses_of(HELDOUT132, SM120_PTX)[0]
    assert any("compute_90" in line for line in capped.evidence)
    assert "no kernel image" in capped.decides


@pytest.mark.parametrize(
    ("text", "reading"),
    [
        # the ptxas XLA names: from the PATH, a toolkit's path, Windows' ptxas.exe; older
        # releases print the status code as "Internal"
        (_NO_PTXAS.format(status="INTERNAL", ptxas="ptxas"), (TOOLKIT, Confidence.MEDIUM)),
        (
            _NO_PTXAS.format(status="Internal", ptxas="/usr/local/cuda-11.2/bin/ptxas"),
            (TOOLKIT, Confidence.MEDIUM),
        ),
        (
            _NO_PTXAS.format(status="INTERNAL", ptxas=r"C:\cuda\bin\ptxas.exe"),
            (TOOLKIT, Confidence.MEDIUM),
        ),
        (_NO_LIBDEVICE, (TOOLKIT, Confidence.MEDIUM)),
        # libdevice has no fallback: the driver's JIT does not stand in for it
        (f"{_FALLBACK}\n{_NO_LIBDEVICE}", (TOOLKIT, Confidence.MEDIUM)),
        # the failure that follows the warning keeps its own weight
        (
            f"{_NO_LIBDEVICE}\nRuntimeError: Internal: libdevice not found at ./libdevice.10.bc",
            (TOOLKIT, Confidence.MEDIUM),
        ),
    ],
)
def test_xla_s_warnings_read_the_toolkit(text: str, reading: tuple[str, Confidence]) -> None:
    assert cause_readings(text)[0] == reading


@pytest.mark.parametrize(
    "text",
    [
        # the driver compiled the PTX instead: the missing ptxas only warned
        f"{_NO_PTXAS.format(status='INTERNAL', ptxas='ptxas')}\n{_FALLBACK}",
        # ptxas started but its version run failed: another status, another story
        "Couldn't get ptxas version string: INTERNAL: Running ptxas --version returned 1",
        # a healthy run: XLA found the directory (its VLOG), or ptxas's own version line
        "I nvptx_compiler.cc:95] Found libdevice dir /usr/local/cuda/nvvm/libdevice",
        "ptxas: NVIDIA (R) Ptx optimizing assembler\nCuda compilation tools, release 12.6",
    ],
)
def test_look_alikes_of_xla_s_warnings_read_no_toolkit(text: str) -> None:
    assert TOOLKIT not in {cause for cause, _ in cause_readings(text)}


@pytest.mark.parametrize(
    ("text", "reading"),
    [
        # PTX of an older capability JIT-compiles for the newer GPU: a low candidate
        (
            _torch_warning("sm_86", "sm_37 sm_50 sm_60 sm_70 sm_75 compute_37"),
            (ARCH, Confidence.LOW),
        ),
        (_torch_warning("sm_120", "sm_50 sm_80 sm_90 compute_90"), (ARCH, Confidence.LOW)),
        # no PTX, PTX newer than the GPU (a cu128 wheel on Pascal), architecture-specific PTX:
        # the build has no code the GPU can run, as the warning says
        (
            _torch_warning("sm_120", "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90"),
            (ARCH, Confidence.HIGH),
        ),
        (
            _torch_warning("sm_61", "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 compute_120"),
            (ARCH, Confidence.HIGH),
        ),
        (_torch_warning("sm_120", "sm_80 sm_90a compute_90a"), (ARCH, Confidence.HIGH)),
        # a kernel failed for want of code all the same: the failure decides
        (
            _torch_warning("sm_120", "sm_80 sm_90 compute_90")
            + "\nRuntimeError: CUDA error: no kernel image is available for execution on the "
            "device",
            (ARCH, Confidence.HIGH),
        ),
    ],
)
def test_pytorch_s_warning_is_capped_only_where_the_build_s_ptx_runs(
    text: str, reading: tuple[str, Confidence]
) -> None:
    assert cause_readings(text)[0] == reading


def test_two_gpus_one_without_runnable_ptx_keep_the_warning_s_reading() -> None:
    # the sm_61 GPU has no PTX at or below it: the warning about it stands
    archs = "sm_75 sm_80 sm_90 compute_90"
    text = f"{_torch_warning('sm_120', archs)}\n{_torch_warning('sm_61', archs)}"
    assert cause_readings(text)[0] == (ARCH, Confidence.HIGH)


def test_repeated_cut_short_messages_leave_the_match_on_the_complete_one() -> None:
    # each variable part is bounded (a path's components, an arch list's entries)
    ptxas = build_toolkit._XLA_PTXAS_NOT_INVOKED
    warned = _NO_PTXAS.format(status="INTERNAL", ptxas="/usr/local/cuda/bin/ptxas")
    whole = warned[warned.index("Couldn't get") :]
    assert match_after_repeated_prefixes(ptxas, whole[:-12], whole) == whole
    warning = ptx_jit._WARNING
    full = _torch_warning("sm_120", "sm_80 sm_90 compute_90")
    first_lines = full[full.index("capability") : full.index(".\nIf you")]
    assert match_after_repeated_prefixes(warning, first_lines[:80], first_lines) == first_lines
    flood = _torch_warning("sm_120", "sm_80 sm_90 compute_90") * (100_000 // len(full))
    assert cause_readings(flood)[0] == (ARCH, Confidence.LOW)


test_the_new_readings_never_raise = never_raise(
    [
        "Couldn't get ptxas version string: ",
        "INTERNAL: Couldn't invoke ",
        "/usr/local/cuda/bin/",
        "ptxas --version",
        "Can't find libdevice directory ${CUDA_DIR}/nvvm/libdevice",
        _FALLBACK,
        "with CUDA capability sm_120 is not compatible with the current PyTorch installation.",
        "The current PyTorch install supports CUDA capabilities",
        " sm_90 compute_90",
        " compute_90a",
        "no kernel image is available for execution",
    ]
)
