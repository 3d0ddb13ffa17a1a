"""CUDA initialised in a process that then forked: the child cannot use CUDA.

The driver's state does not survive fork(): a child forked after its parent initialised CUDA
cannot initialise it again (PyTorch's notes, "CUDA in multiprocessing": the CUDA runtime does not
support the fork start method; spawn or forkserver is required). The programs that detect it say
so in their own words, each raised only in that case:

- PyTorch's "Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing,
  you must use the 'spawn' start method" (torch/cuda/__init__.py, ``_lazy_init``: raised when
  ``_is_in_bad_fork()``: the at-fork handler PyTorch registers when it initialises CUDA marks
  every child forked after that). Without its exception or its second sentence — an issue's
  title, a quote — it is the usual reading; prose that names it as what it avoids ("to avoid
  the '…' error", "to avoid: RuntimeError: …") is not read, with its exception's name or without.
- numba's ``CudaDriverError("CUDA initialized before forking")``, with its critical log line "pid
  N forked from pid M after CUDA driver init" (numba/cuda/cudadrv/driver.py, ``Driver.
  _detect_fork``, run when a driver call returns CUDA_ERROR_NOT_INITIALIZED in a process whose
  pid is not the one that initialised the driver).
- accelerate's notebook_launcher (accelerate/launchers.py), which starts its processes with
  start_method="fork": "CUDA has been initialized before the `notebook_launcher` could create a
  forked subprocess" (its rewording of PyTorch's message from a worker) and, before it forks,
  "To launch a multi-GPU training from your notebook, you need to avoid running any instruction
  using `torch.cuda` in any cell" (raised when ``torch.cuda.is_initialized()``).
- Lightning's "Lightning can't create new processes if CUDA is already initialized"
  (lightning/fabric/strategies/launchers/multiprocessing.py, ``_check_bad_cuda_fork``, called by
  the fork / forkserver launcher of the ddp_notebook and ddp_fork strategies; its docstring: the
  message replaces PyTorch's "Cannot re-initialize CUDA in forked subprocess").
- CUDA's own initialisation error — "initialization error" (cudaErrorInitializationError, 3),
  CUDA_ERROR_NOT_INITIALIZED — where the same text says the process was forked (a forked
  subprocess, child or worker, the 'fork' start method, Celery's prefork pool, Python's
  ForkProcess-N / ForkPoolWorker-N): the usual reading.
  Without a fork in the text it stays what it reads otherwise.
- vLLM's warning "We must use the `spawn` multiprocessing start method. Overriding
  VLLM_WORKER_MULTIPROC_METHOD to 'spawn' … Reasons: CUDA is initialized" (``_maybe_force_spawn``
  in vllm/utils/__init__.py, later vllm/utils/system_utils.py; older releases' multiproc_worker_
  utils.py: "CUDA was previously initialized. We must use the `spawn` …") is no failure: vLLM
  avoided the fork itself, and runs that work print it. Its docs' multiprocessing design page
  and troubleshooting guide name the one failure that follows it: a script without a
  ``__main__`` guard, which spawn re-imports, and Python's "An attempt has been made to start a
  new process before the current process has finished its bootstrapping phase". Only with that
  error is it read, as the usual reading; alone it reads nothing.

Not these: the word "fork" in other prose (a repository's fork — "after forking the repo", "after
a fork of upstream" —, a CUDA graph's forked stream),
Python's DeprecationWarning "This process is multi-threaded, use of fork() may lead to deadlocks
in the child" and JAX's "os.fork() was called" (warnings about threads, no CUDA failure), the
'spawn' advice alone, and other devices' re-initialisation errors (PyTorch's XPU, Ascend's NPU).
"""

from __future__ import annotations

import re

from gpuwarden.health.explain.match import quoted, raised_mentions
from gpuwarden.health.explain.votes import Vote

CAUSE = "cuda-initialized-before-fork"
# A paste mentions one (lower case) before the patterns are tried.
WORDS = ("fork", "any cell", "create new processes", "bootstrapping phase")

# Weights (rank.py: ≥ 0.85 high, ≥ 0.55 medium): a program's message raised only for this
# states it; the message without its exception, CUDA's initialisation error where the text says
# fork, and vLLM's switch to spawn followed by the bootstrapping error are the usual reading.
STATED = 0.95
NAMED = 0.7
FORKED_INIT_ERROR = 0.7
SPAWN_UNGUARDED = 0.6

_TORCH = re.compile(r"Cannot re-?initiali[sz]e CUDA in forked sub-?process", re.IGNORECASE)
# PyTorch's message as raised: after its exception (or vLLM's "…method init_device:"), or with
# its second sentence
_TORCH_EXCEPTION_BEFORE = re.compile(r"(?:Error|Exception|:)\W{0,3}$", re.IGNORECASE)
# matched right after the message; the blanks bounded (a search over a long blank run stays
# linear)
_TORCH_SECOND_SENTENCE = re.compile(r"\.?\s{0,8}To use CUDA with multiproc", re.IGNORECASE)
_NUMBA = re.compile(r"CUDA in?itiali[sz]ed before forking", re.IGNORECASE)
_NUMBA_EXCEPTION_BEFORE = re.compile(r"CudaDriverError\W{0,3}$", re.IGNORECASE)
_NUMBA_FORK_LOG = re.compile(r"pid \d+ forked from pid \d+ after CUDA driver init", re.IGNORECASE)
_ACCELERATE = re.compile(
    r"CUDA has been initiali[sz]ed before the `?notebook_launcher`? could create a forked|"
    r"To launch a multi-GPU training from your notebook, you need to avoid running any "
    r"instruction using `?torch\.cuda`? in any cell",
    re.IGNORECASE,
)
_LIGHTNING = re.compile(
    r"Lightning can[’']?t create new processes if CUDA is already initiali[sz]ed", re.IGNORECASE
)
# CUDA's initialisation error in the runtime's, the driver API's and the frameworks' words
# (THCudaCheck's "error=3 : initialization error", mshadow's "CUDA: initialization error"); not
# nvidia-container-cli's "initialization error", which is the container runtime's own.
_INIT_ERROR = re.compile(
    r"CUDA(?: error)?\s*:?\s*initiali[sz]ation error|cudaErrorInitializationError|"
    r"CUDA_ERROR_NOT_INITIALIZED|\berror\s*=\s*3\s*:\s*initiali[sz]ation error|"
    r"cuda runtime error \(3\)",
    re.IGNORECASE,
)
# The text says the failing process was forked: a forked subprocess / child / worker, the fork
# start method set, "after / before fork()" or forking a process, child or worker, Celery's
# prefork pool, and the names Python gives the processes of its fork context: ForkProcess-N, and
# a Pool's ForkPoolWorker-N (Lib/multiprocessing/context.py's ForkProcess, process.py's default
# name "<class>-N" and its "Process <name>:" header over a child's traceback, pool.py's
# replace('Process', 'PoolWorker')), which Celery's worker log lines carry too. A bare "after
# forking" or "after a fork" is a repository's as often ("after forking and cloning the repo",
# "after a fork of upstream"): it needs its object.
_FORK_STATED = re.compile(
    r"\bforked (?:sub-?)?process(?:es)?\b|\bforked (?:child|children|workers?)\b|"
    r"\b(?:after|before) (?:the |a )?(?:os\.)?fork\(\)|"
    r"\b(?:after|before) forking (?:the |a |its |each |every )?(?:(?:sub-?)?process(?:es)?|"
    r"child(?:ren)?|workers?)\b|"
    r"\b(?:start_method|set_start_method|get_context|multiprocessing_context)\W{1,4}fork\b|"
    r"\bFork(?:Process|PoolWorker)-\d|\bprefork\b",
    re.IGNORECASE,
)
_VLLM_SPAWN = re.compile(
    r"CUDA was previously initiali[sz]ed\.?\s*We must use the .?spawn.? multiprocessing|"
    r"We must use the .?spawn.? multiprocessing start method\..{0,300}?\bCUDA is initiali[sz]ed",
    re.IGNORECASE,
)
_BOOTSTRAPPING = re.compile(
    r"An attempt has been made to start a new process before the\s*current process has "
    r"finished its bootstrapping phase",
    re.IGNORECASE,
)

_TORCH_MEANING = (
    "PyTorch refuses CUDA in a process forked after its parent initialised CUDA: the driver's "
    "state does not survive fork"
)
_NUMBA_MEANING = (
    "numba found CUDA's driver initialised by another process than this one: it was forked "
    "after its parent initialised CUDA"
)
_ACCELERATE_MEANING = (
    "accelerate's notebook_launcher forks its processes, and CUDA was already initialised in the "
    "notebook (a cell or an import touched CUDA first)"
)
_LIGHTNING_MEANING = (
    "Lightning's fork launcher (ddp_notebook / ddp_fork) refuses to fork: CUDA was already "
    "initialised in this process (a torch.cuda call, a model moved to the GPU)"
)
_NAMED_MEANING = (
    "the message a forked child raises when its parent initialised CUDA, without the exception "
    "that raised it"
)
_INIT_ERROR_MEANING = (
    "CUDA could not initialise in a process the text says was forked: a child forked after its "
    "parent initialised CUDA cannot initialise it again"
)
_SPAWN_UNGUARDED_MEANING = (
    "vLLM switched its workers to spawn because CUDA was initialised before them, and spawn "
    "re-imported a main module that has no `if __name__ == '__main__':` guard"
)
_SPAWN_UNGUARDED_DECIDES = (
    "the script's top level: the LLM built outside `if __name__ == '__main__':`, and a CUDA "
    "call before it (the reason vLLM gave for spawn)"
)
_SPAWN_UNGUARDED_FIXES = (
    "put the script's top level under `if __name__ == '__main__':` (spawn re-imports the main "
    "module in each worker), or build the LLM before anything touches CUDA so that vLLM need "
    "not spawn",
)

# The two messages prose quotes (an issue's title, "to avoid the '…' error"), each with what
# stands right before it when raised (its exception), what follows it when raised (its next
# sentence), and what it means
_QUOTED_MESSAGES: tuple[
    tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str] | None, str], ...
] = (
    (_TORCH, _TORCH_EXCEPTION_BEFORE, _TORCH_SECOND_SENTENCE, _TORCH_MEANING),
    (_NUMBA, _NUMBA_EXCEPTION_BEFORE, None, _NUMBA_MEANING),
)
# The messages that state the cause wherever they stand, strongest first: the first that matches
# is read.
_STATED_READINGS: tuple[tuple[re.Pattern[str], str], ...] = (
    (_NUMBA_FORK_LOG, _NUMBA_MEANING),
    (_ACCELERATE, _ACCELERATE_MEANING),
    (_LIGHTNING, _LIGHTNING_MEANING),
)


def _stated_vote(flat: str) -> Vote | None:
    for message, exception_before, sentence_after, meaning in _QUOTED_MESSAGES:
        for found, before in raised_mentions(message, flat):
            if exception_before.search(before) is not None or (
                sentence_after is not None and sentence_after.match(flat, found.end())
            ):
                return Vote(CAUSE, STATED, quoted(found[0], meaning))
    for pattern, meaning in _STATED_READINGS:
        stated = pattern.search(flat)
        if stated is not None:
            return Vote(CAUSE, STATED, quoted(stated[0], meaning))
    return None


def _named_vote(flat: str) -> Vote | None:
    """A message without its exception, unless every mention is prose avoiding it."""
    for message, _, _, _ in _QUOTED_MESSAGES:
        for found, _ in raised_mentions(message, flat):
            return Vote(CAUSE, NAMED, quoted(found[0], _NAMED_MEANING))
    return None


def _forked_init_error_vote(flat: str) -> Vote | None:
    found = _INIT_ERROR.search(flat)
    if found is None or _FORK_STATED.search(flat) is None:
        return None
    return Vote(CAUSE, FORKED_INIT_ERROR, quoted(found[0], _INIT_ERROR_MEANING))


def _spawn_unguarded_vote(flat: str) -> Vote | None:
    found = _VLLM_SPAWN.search(flat)
    if found is None or _BOOTSTRAPPING.search(flat) is None:
        return None
    evidence = quoted(found[0], _SPAWN_UNGUARDED_MEANING)
    return Vote(CAUSE, SPAWN_UNGUARDED, evidence, _SPAWN_UNGUARDED_DECIDES, _SPAWN_UNGUARDED_FIXES)


def fork_votes(flat: str) -> list[Vote]:
    """The vote for ``cuda-initialized-before-fork`` in a flattened paste (at most one): the
    strongest reading that matches."""
    for read in (_stated_vote, _named_vote, _forked_init_error_vote, _spawn_unguarded_vote):
        vote = read(flat)
        if vote is not None:
            return [vote]
    return []
