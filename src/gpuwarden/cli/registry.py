"""The verbs, by name, without importing them: ``gpuwarden --help`` stays fast."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CommandInfo:
    module: str  # module under gpuwarden.cli.commands with register(parser) and run(args)
    summary: str


# Order matters: it is the order of `gpuwarden --help`.
COMMANDS: dict[str, CommandInfo] = {
    "plan": CommandInfo("plan", "per-GPU memory of a training, fine-tuning or inference job"),
    "catalog": CommandInfo("catalog", "list the GPUs, cloud instances and models gpuwarden knows"),
}
