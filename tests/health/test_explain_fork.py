"""CUDA initialised before a fork (health/explain/fork.py): each program's own wording read with
its confidence — PyTorch's _lazy_init, numba's _detect_fork, accelerate's notebook_launcher,
Lightning's _check_bad_cuda_fork (high); the message without its exception, CUDA's
initialisation error where the text says fork, vLLM's switch to spawn followed by the unguarded
main module's bootstrapping error (medium) — and the look-alikes that are none of them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpuwarden.cli.main import main
from gpuwarden.health.explain import BY_CODE, explain_text, fork
from gpuwarden.health.explain.fork import CAUSE
from gpuwarden.types.health import Confidence
from tests.health.explain_sets import cause_readings, causes_read, never_raise

TORCH = (
    "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with "
    "multiprocessing, you must use the 'spawn' start method"
)
# vLLM's worker log names the method before the message (vllm-project/vllm#7151)
TORCH_IN_VLLM_WORKER = (
    "(VllmWorkerProcess pid=305) ERROR 01-19 03:55:24 multiproc_worker_utils.py:233] Exception in "
    "worker VllmWorkerProcess while processing method init_device: Cannot re-initialize CUDA in "
    "forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method"
)
# PyTorch before Python 3.4 support was dropped worded the second sentence otherwise
TORCH_PY2 = (
    "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with "
    "multiprocessing, you must use Python 3.4+ and the 'spawn' start method"
)
TORCH_TITLE = "[Bug] Cannot re-initialize CUDA in forked subprocess with gunicorn workers"
NUMBA = "numba.cuda.cudadrv.error.CudaDriverError: CUDA initialized before forking"
NUMBA_LOG = (
    "ERROR:numba.cuda.cudadrv.driver:Call to cuCtxGetCurrent results in "
    "CUDA_ERROR_NOT_INITIALIZED\nCRITICAL:numba.cuda.cudadrv.driver:pid 4312 forked from pid "
    "4280 after CUDA driver init"
)
ACCELERATE_FORKED = (
    "RuntimeError: CUDA has been initialized before the `notebook_launcher` could create a "
    "forked subprocess. This likely stems from an outside import causing issues once the "
    "`notebook_launcher()` is called."
)
ACCELERATE_ANY_CELL = (
    "ValueError: To launch a multi-GPU training from your notebook, you need to avoid running "
    "any instruction using `torch.cuda` in any cell. Restart your notebook and make sure no "
    "cells use any CUDA function."
)
LIGHTNING = (
    "RuntimeError: Lightning can't create new processes if CUDA is already initialized. Did you "
    "manually call `torch.cuda.*` functions, have moved the model to the device, or allocated "
    "memory on the GPU any other way? Please remove any such calls, or change the selected "
    "strategy. You will have to restart the Python kernel."
)
LIGHTNING_CURLY = "“Lightning can’t create new processes if CUDA is already initialized.”"
INIT_ERROR_FORKED = (
    "Process ForkPoolWorker-1 (a forked worker of multiprocessing.Pool):\nRuntimeError: CUDA "
    "error: initialization error\nCUDA kernel errors might be asynchronously reported"
)
THC_INIT_ERROR_FORK_METHOD = (
    "mp.set_start_method('fork')\nTHCudaCheck FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp "
    "line=51 error=3 : initialization error"
)
DRIVER_NOT_INITIALIZED_PREFORK = (
    "celery@node1 v5.3.4 concurrency: 4 (prefork)\n"
    "cupy_backends.cuda.api.driver.CUDADriverError: CUDA_ERROR_NOT_INITIALIZED: initialization "
    "error"
)
VLLM_SPAWN = (
    "WARNING 04-17 17:24:41 [utils.py:2304] We must use the `spawn` multiprocessing start method. "
    "Overriding VLLM_WORKER_MULTIPROC_METHOD to 'spawn'. See https://docs.vllm.ai/en/latest/"
    "getting_started/troubleshooting.html#python-multiprocessing for more information. Reason: "
    "CUDA is initialized"
)
VLLM_SPAWN_BEFORE_0_7 = (
    "WARNING 12-11 14:50:37 multiproc_worker_utils.py:281] CUDA was previously initialized. We "
    "must use the `spawn` multiprocessing start method. Setting VLLM_WORKER_MULTIPROC_METHOD to "
    "'spawn'."
)
BOOTSTRAPPING = (
    "RuntimeError:\n        An attempt has been made to start a new process before the\n"
    "        current process has finished its bootstrapping phase.\n\n        This probably "
    "means that you are not using fork to start your\n        child processes and you have "
    "forgotten to use the proper idiom\n        in the main module:"
)


@pytest.mark.parametrize(
    "text",
    [
        TORCH,
        TORCH_IN_VLLM_WORKER,
        TORCH_PY2,
        NUMBA,
        NUMBA_LOG,
        ACCELERATE_FORKED,
        ACCELERATE_ANY_CELL,
        LIGHTNING,
        LIGHTNING_CURLY,
    ],
)
def test_a_programs_own_message_states_the_cause(text: str) -> None:
    assert cause_readings(text) == [(CAUSE, Confidence.HIGH)]


@pytest.mark.parametrize(
    "text",
    [
        TORCH_TITLE,
        "Cannot re-initialise CUDA in forked subprocess",
        "Numba: CUDA initialized before forking when the pool maps a kernel",
        INIT_ERROR_FORKED,
        DRIVER_NOT_INITIALIZED_PREFORK,
    ],
)
def test_the_message_without_its_exception_or_an_init_error_in_a_fork_is_the_usual_reading(
    text: str,
) -> None:
    [diagnosis] = explain_text(text).diagnoses
    assert (diagnosis.cause, diagnosis.confidence) == (CAUSE, Confidence.MEDIUM)
    assert diagnosis.decides


def test_error_3_reads_the_fork_first_only_where_the_text_says_fork() -> None:
    # error=3 is also read by its number (driver-not-loaded, one candidate): it stays below
    assert cause_readings(THC_INIT_ERROR_FORK_METHOD) == [
        (CAUSE, Confidence.MEDIUM),
        ("driver-not-loaded", Confidence.LOW),
    ]
    without_fork = THC_INIT_ERROR_FORK_METHOD.split("\n")[1]
    assert cause_readings(without_fork) == [("driver-not-loaded", Confidence.LOW)]


def test_vllms_switch_to_spawn_is_read_only_with_the_bootstrapping_error_it_leads_to() -> None:
    for warning in (VLLM_SPAWN, VLLM_SPAWN_BEFORE_0_7):
        # a run that works prints the warning too: vLLM avoided the fork itself
        assert causes_read(warning + "\nINFO 04-17 17:24:47 [core.py:61] Initializing") == set()
        [diagnosis] = explain_text(warning + "\n" + BOOTSTRAPPING).diagnoses
        assert (diagnosis.cause, diagnosis.confidence) == (CAUSE, Confidence.MEDIUM)
        assert "__main__" in diagnosis.fixes[0]
        assert diagnosis.fixes[1:] == BY_CODE[CAUSE].fixes
    # the bootstrapping error alone is a missing main guard under spawn, no CUDA in it
    assert causes_read(BOOTSTRAPPING) == set()
    # vLLM's other reason to spawn (WSL's NVML) is not CUDA initialised first
    wsl = VLLM_SPAWN.replace("CUDA is initialized", "WSL is detected and NVML is not compatible")
    assert CAUSE not in causes_read(wsl + "\n" + BOOTSTRAPPING)


@pytest.mark.parametrize(
    "text",
    [
        # Python 3.12's DeprecationWarning and JAX's warning: threads and fork, no CUDA failure
        "DeprecationWarning: This process (pid=1234) is multi-threaded, use of fork() may lead to "
        "deadlocks in the child.",
        "RuntimeWarning: os.fork() was called. os.fork() is incompatible with multithreaded code, "
        "and JAX is multithreaded, so this will likely lead to a deadlock.",
        # only the fix quoted
        "To use CUDA with multiprocessing, you must use the 'spawn' start method",
        "torch.multiprocessing.set_start_method('spawn', force=True)",
        # prose that names the message as what it avoids
        "We create the pool at import time to avoid the 'Cannot re-initialize CUDA in forked "
        "subprocess' error",
        "How can I avoid CUDA initialized before forking errors in my pool?",
        # other devices' re-initialisation errors
        "RuntimeError: Cannot re-initialize XPU in forked subprocess. To use XPU with "
        "multiprocessing, you must use the 'spawn' start method",
        "RuntimeError: Cannot re-initialize NPU in forked subprocess. To use NPU with "
        "multiprocessing, you must use the 'spawn' start method",
        # CUDA's initialisation error where the text says no fork, or a repository's fork
        "RuntimeError: CUDA error: initialization error",
        "After forking the repo I get RuntimeError: CUDA error: initialization error",
        "I forked this project last week; now CUDA error: initialization error on every run",
        # fork in a CUDA graph's words
        "cudaErrorStreamCaptureUnjoined: capturing stream has unjoined work (a forked stream)",
    ],
)
def test_look_alikes_are_not_read(text: str) -> None:
    assert CAUSE not in causes_read(text)


def test_spawn_advice_in_another_errors_thread_keeps_that_errors_cause() -> None:
    oom = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 23.65 GiB of which 1.02 GiB is free.\nI already call "
        "torch.multiprocessing.set_start_method('spawn') in a fork of the repo"
    )
    causes = causes_read(oom)
    assert CAUSE not in causes
    assert causes


def test_a_vllm_fork_named_in_prose_beside_another_error_is_not_read() -> None:
    text = (
        "a vLLM fork's docker image (cuda 12.8.1 tag) on driver 570.195.03\nRuntimeError: "
        "The NVIDIA driver on your system is too old (found version 12080)."
    )
    assert CAUSE not in causes_read(text)
    assert "driver-too-old" in causes_read(text)


_MEGABYTE = 1 << 20


@pytest.mark.parametrize(
    ("word", "weights"),
    [
        ("RuntimeError: ", []),
        (": Cannot re-initialize CUDA in forked ", []),
        ("avoid the Cannot re-initialize CUDA in forked subprocess ", []),
        ("Cannot re-initialize CUDA in forked subprocess ", [fork.NAMED]),
        ("CUDA error: initialization error ", []),
        ("after fork ", []),
        ("before forking the repo ", []),
        ("We must use the `spawn` multiprocessing start method. ", []),
        ("An attempt has been made to start a new process before the ", []),
        ("Lightning can't create new processes if CUDA is already ", []),
    ],
)
def test_a_megabyte_of_trigger_words_is_read_in_linear_time(
    word: str, weights: list[float]
) -> None:
    # no timed assertion: a backtracking pattern would take minutes at this size (every mention
    # of the avoided message follows an "avoid": none is read)
    text = word * (_MEGABYTE // len(word))
    assert [vote.weight for vote in fork.fork_votes(text)] == weights


def _json(capsys: pytest.CaptureFixture[str], text: str) -> dict[str, Any]:
    assert main(["explain", "--json", text]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def test_the_json_names_the_code_its_category_and_the_fixes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    [diagnosis] = _json(capsys, TORCH)["diagnoses"]
    assert diagnosis["cause"] == "cuda-initialized-before-fork"
    assert diagnosis["category"] == "app"
    assert diagnosis["confidence"] == "high"
    assert diagnosis["fixes"] == list(BY_CODE[CAUSE].fixes)
    assert "spawn" in diagnosis["fixes"][0] and "__main__" in diagnosis["fixes"][0]
    assert diagnosis["references"] == list(BY_CODE[CAUSE].references)
    assert "Cannot re-initialize CUDA in forked subprocess" in diagnosis["evidence"][0]


test_the_fork_readings_never_raise = never_raise(
    [
        "Cannot re-initialize CUDA in forked subprocess",
        "RuntimeError: ",
        ". To use CUDA with multiprocessing",
        "CudaDriverError: CUDA initialized before forking",
        "pid 12 forked from pid 3 after CUDA driver init",
        "CUDA has been initialized before the `notebook_launcher` could create a forked",
        "you need to avoid running any instruction using `torch.cuda` in any cell",
        "Lightning can't create new processes if CUDA is already initialized",
        "CUDA error: initialization error",
        "CUDA_ERROR_NOT_INITIALIZED",
        "forked subprocess",
        "after fork",
        "(prefork)",
        "to avoid the '",
        "We must use the `spawn` multiprocessing start method.",
        "Reasons: CUDA is initialized",
        "An attempt has been made to start a new process before the current process has "
        "finished its bootstrapping phase",
    ]
)
