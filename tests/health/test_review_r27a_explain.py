"""Review r27a: this session's new explain readings on their nearest look-alikes.

- cuda-initialized-before-fork (fork.py): PyTorch's message quoted with its exception as what a
  program avoids ("to avoid 'RuntimeError: Cannot re-initialize …'") is prose like the bare
  quote; a repository's fork ("after forking and cloning the repo", "after a fork of upstream")
  is not the process being forked; Python's own names for the processes of its fork context
  (ForkProcess-N, a Pool's ForkPoolWorker-N, also in Celery's log lines) are.
- extension-build-toolkit (build_toolkit.py): CMake's check_language(CUDA) "Looking for a CUDA
  compiler - NOTFOUND" is printed by every CPU-only build of a project whose CUDA is optional; a
  build that then fails for a reason naming no CUDA (a missing package, a C++ error) is not read
  as a missing toolkit.
- CUDA's error 9 (cudaErrorInvalidConfiguration, the same number in both numberings) printed
  without its string reads the launch beyond the GPU's limits, low: below its text's medium.

Each reading linear on a megabyte of its trigger words (no timed assertion: a backtracking
pattern would take minutes at this size), and never raising on pastes spliced from them.
"""

from __future__ import annotations

import pytest

from gpuwarden.health.explain import build_toolkit, fork
from gpuwarden.types.health import Confidence
from tests.health.explain_sets import cause_readings, causes_read, never_raise

FORK = fork.CAUSE
TOOLKIT = build_toolkit.CAUSE
TORCH_MESSAGE = "Cannot re-initialize CUDA in forked subprocess"
TORCH_RAISED = (
    f"RuntimeError: {TORCH_MESSAGE}. To use CUDA with multiprocessing, you must use the 'spawn' "
    "start method"
)
ILLEGAL_ADDRESS = "RuntimeError: CUDA error: an illegal memory access was encountered"
INIT_ERROR = "RuntimeError: CUDA error: initialization error"


@pytest.mark.parametrize(
    "avoided",
    [
        f"We switched to spawn to avoid 'RuntimeError: {TORCH_MESSAGE}'.",
        # the ":" of "avoid:" is no exception's
        f"# spawn, to avoid: {TORCH_MESSAGE}. To use CUDA with multiprocessing, you must use the "
        "'spawn' start method",
        f"This prevents torch.multiprocessing's RuntimeError: {TORCH_MESSAGE}",
        "set_start_method('spawn') to avoid numba's CudaDriverError: CUDA initialized before "
        "forking",
    ],
)
def test_a_message_quoted_with_its_exception_as_what_is_avoided_is_not_read(
    avoided: str,
) -> None:
    assert FORK not in causes_read(avoided + "\n" + ILLEGAL_ADDRESS)
    assert "illegal-memory-access" in causes_read(avoided + "\n" + ILLEGAL_ADDRESS)


def test_the_message_raised_after_prose_that_avoided_it_is_still_read() -> None:
    text = f"I use spawn to avoid the '{TORCH_MESSAGE}' error, yet the worker says:\n{TORCH_RAISED}"
    assert cause_readings(text) == [(FORK, Confidence.HIGH)]
    # raised, the same words after an exception name are the program's
    assert cause_readings(f"Exception: {TORCH_MESSAGE}") == [(FORK, Confidence.HIGH)]


@pytest.mark.parametrize(
    "repository_fork",
    [
        "After forking and cloning the repository, python train.py fails:",
        "After a fork of the upstream repo was made, I get:",
        "Before forking it I ran the original and got",
        "after forking, I changed the config and now:",
    ],
)
def test_a_repositorys_fork_beside_cudas_initialization_error_is_not_read(
    repository_fork: str,
) -> None:
    assert FORK not in causes_read(repository_fork + "\n" + INIT_ERROR)


@pytest.mark.parametrize(
    "process_fork",
    [
        "CUDA is set up in the parent; after forking the workers each one fails with",
        "the model is loaded before os.fork() and the child then gets",
        # Python's header over a child's traceback (multiprocessing/process.py) in the fork
        # context, and a Celery worker's log line (billiard keeps the pool's names)
        'Process ForkProcess-1:\nTraceback (most recent call last):\n  File "/usr/lib/python3.10/'
        'multiprocessing/process.py", line 314, in _bootstrap',
        "[2023-05-01 10:00:05,000: ERROR/ForkPoolWorker-3] Task app.tasks.infer[1c2d] raised "
        "unexpected:",
    ],
)
def test_a_process_fork_beside_cudas_initialization_error_is_the_usual_reading(
    process_fork: str,
) -> None:
    [diagnosis] = cause_readings(process_fork + "\n" + INIT_ERROR)
    assert diagnosis == (FORK, Confidence.MEDIUM)


@pytest.mark.parametrize(
    "not_forked",
    [
        # spawn's and forkserver's processes start without the parent's CUDA state
        "[2023-05-01 10:00:05,000: ERROR/SpawnPoolWorker-3] Task app.tasks.infer raised:",
        "Process SpawnProcess-1:",
        "Process ForkServerProcess-2:",
        "Process ForkServerPoolWorker-2:",
    ],
)
def test_spawn_and_forkserver_processes_are_no_fork(not_forked: str) -> None:
    assert FORK not in causes_read(not_forked + "\n" + INIT_ERROR)


def test_a_fork_pool_worker_without_a_cuda_error_reads_nothing() -> None:
    celery = (
        "[2023-05-01 10:00:00,000: INFO/MainProcess] celery@host ready.\n"
        ".> concurrency: 4 (prefork)\n"
        "[2023-05-01 10:00:05,000: ERROR/ForkPoolWorker-1] Task app.tasks.run raised unexpected: "
        "ConnectionError('Error 111 connecting to localhost:6379. Connection refused.')"
    )
    assert causes_read(celery) == set()


CMAKE_CHECK = "-- Looking for a CUDA compiler\n-- Looking for a CUDA compiler - NOTFOUND\n"


@pytest.mark.parametrize(
    "other_failure",
    [
        # CMake's find_package of another package, a C++ header, the linker
        "-- Could NOT find Boost (missing: filesystem)\nCMake Error at CMakeLists.txt:40 "
        '(find_package):\n  Could not find a package configuration file provided by "Boost".\n'
        "-- Configuring incomplete, errors occurred!",
        "-- Configuring done\n[ 50%] Building CXX object CMakeFiles/foo.dir/src/foo.cpp.o\n"
        "/src/foo.cpp:12:10: fatal error: Eigen/Dense: No such file or directory\n"
        "compilation terminated.",
        "foo.obj : error LNK2019: unresolved external symbol png_read_info referenced in function "
        "load_png",
    ],
)
def test_cmakes_cuda_check_before_a_failure_that_names_no_cuda_is_not_read(
    other_failure: str,
) -> None:
    assert TOOLKIT not in causes_read(CMAKE_CHECK + other_failure)


@pytest.mark.parametrize(
    "cuda_failure",
    [
        # darknet's and camera_calibration's CMakeLists: the project wanted CUDA
        "CMake Error at CMakeLists.txt:153 (message):\n  CUDA not found, please build explicitly "
        "with -DENABLE_CUDA=OFF if you do\n  not want CUDA.",
        "CMake Error at CMakeLists.txt:60 (message):\n  CMake does not find the CUDA SDK, which is "
        "required to build this\n  application",
        # no failure of the build's own: pip's summary lines are no reason
        "-- NO CUDA INSTALLATION FOUND, INSTALLING CPU VERSION ONLY!\n[end of output]\n"
        "note: This error originates from a subprocess, and is likely not a problem with pip.\n"
        "ERROR: Failed building wheel for torchmcubes\nerror: failed-wheel-build-for-install",
    ],
)
def test_cmakes_cuda_check_before_a_cuda_failure_or_none_is_the_usual_reading(
    cuda_failure: str,
) -> None:
    assert cause_readings(CMAKE_CHECK + cuda_failure)[0] == (TOOLKIT, Confidence.MEDIUM)


LAUNCH = "launch-out-of-resources"


@pytest.mark.parametrize(
    "number_alone",
    [
        # PointGroup's title and nvdiffrast's check print CUDA's error 9 without its string
        "RuntimeError: cuda runtime error (9)",
        "RuntimeError: Cuda error: 9[cudaLaunchKernel(func_tbl[func_idx], gridSize, blockSize, "
        "args, 0, stream);]",
    ],
)
def test_cudas_error_9_alone_reads_a_launch_beyond_the_gpus_limits_below_its_text(
    number_alone: str,
) -> None:
    # cudaErrorInvalidConfiguration in both numberings: a launch requesting what the device can
    # never give; the number is weaker evidence than CUDA's string, which reads medium
    assert cause_readings(number_alone) == [(LAUNCH, Confidence.LOW)]
    with_string = "CUDA error 9: invalid configuration argument"
    assert cause_readings(with_string) == [(LAUNCH, Confidence.MEDIUM)]


@pytest.mark.parametrize(
    "other_nine",
    [
        "OSError: [Errno 9] Bad file descriptor",
        "CUDA error 98",  # cudaErrorInvalidDeviceFunction, not 9
        "cuDNN error 9",
        "step 9 of 10: error 9 in the data loader",
    ],
)
def test_other_nines_are_not_cudas_error_9(other_nine: str) -> None:
    assert LAUNCH not in causes_read(other_nine)


_MEGABYTE = 1 << 20


@pytest.mark.parametrize(
    ("word", "weights"),
    [
        (f"avoid RuntimeError: {TORCH_MESSAGE} ", []),
        (f"to avoid: {TORCH_MESSAGE}. To use CUDA with multiprocessing ", []),
        ("after forking the ", []),
        ("ForkPoolWorker-", []),
        ("Process ForkProcess-1: CUDA error: initialization error ", [fork.FORKED_INIT_ERROR]),
        ("avoid CudaDriverError: CUDA initialized before forking ", []),
    ],
)
def test_a_megabyte_of_the_fork_trigger_words_is_read_in_linear_time(
    word: str, weights: list[float]
) -> None:
    text = word * (_MEGABYTE // len(word))
    assert [vote.weight for vote in fork.fork_votes(text)] == weights


@pytest.mark.parametrize(
    ("word", "weights"),
    [
        ("-- Looking for a CUDA compiler - NOTFOUND ", [build_toolkit.BUILT_WITHOUT_CUDA]),
        ("Looking for a CUDA compiler - NOTFOUND CMake Error ", [build_toolkit.BUILT_WITHOUT_CUDA]),
        ("CMake Error ", []),
        ("a.cpp:1:2: error: ", []),
        ("error C1083 ", []),
    ],
)
def test_a_megabyte_of_the_cmake_trigger_words_is_read_in_linear_time(
    word: str, weights: list[float]
) -> None:
    text = word * (_MEGABYTE // len(word))
    assert [vote.weight for vote in build_toolkit.build_toolkit_votes(text)] == weights


def test_cmakes_check_then_a_megabyte_without_cuda_after_its_failure_is_not_read() -> None:
    # the failure's message is read for CUDA over a bounded span, not to the end of the text
    text = CMAKE_CHECK + "CMake Error at CMakeLists.txt:4 (message): " + "x" * _MEGABYTE + " CUDA"
    assert build_toolkit.build_toolkit_votes(" ".join(text.split())) == []


test_the_reviewed_readings_never_raise = never_raise(
    [
        TORCH_MESSAGE,
        "avoid ",
        "to avoid: ",
        "RuntimeError: ",
        "CudaDriverError: CUDA initialized before forking",
        ". To use CUDA with multiprocessing",
        "CUDA error: initialization error",
        "after forking the workers",
        "after forking and cloning the repo",
        "before os.fork()",
        "Process ForkProcess-1:",
        "ERROR/ForkPoolWorker-3]",
        "SpawnPoolWorker-1",
        "-- Looking for a CUDA compiler - NOTFOUND",
        "CMake Error at CMakeLists.txt:40 (find_package):",
        "/src/foo.cpp:12:10: fatal error: ",
        "error LNK2019: ",
        "CUDA not found",
    ]
)
