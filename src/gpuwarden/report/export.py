"""What `gpuwarden export` says to people: the start-up line on stderr (stdout stays free for
``--once``'s exposition), its log lines, and the exposition of ``--once``."""

from __future__ import annotations

import logging
import sys

_LOGGER = "gpuwarden.export"


def start_logging() -> None:
    """Warnings of the running exporter (a backend that fails, pods unavailable, a web config
    that does not reload) go to stderr, one line each."""
    logger = logging.getLogger(_LOGGER)
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("gpuwarden export: %(levelname)s: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.WARNING)
        logger.propagate = False


def print_serving(
    *,
    url: str,
    backend: str,
    simulated: bool,
    interval_s: float,
    devices: int,
    basic_auth: bool,
    kubernetes: bool,
) -> None:
    """``gpuwarden export: serving http://127.0.0.1:9400/metrics`` and what it serves."""
    facts = [f"backend {backend}", f"{devices} GPU(s)", f"every {interval_s:g} s"]
    if basic_auth:
        facts.append("basic auth")
    if kubernetes:
        facts.append("pod labels from the kubelet")
    line = f"gpuwarden export: serving {url} ({', '.join(facts)})"
    if simulated:
        line += (
            "\ngpuwarden export: SIMULATED data: every GPU and verdict series carries "
            'simulated="true"'
        )
    print(line, file=sys.stderr, flush=True)


def print_exposition(text: str) -> None:
    sys.stdout.write(text)
