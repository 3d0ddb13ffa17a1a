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
    "snapshot": CommandInfo("snapshot", "one reading of every GPU (NVML, nvidia-smi, dcgm, sim)"),
    "record": CommandInfo("record", "run a command while recording GPU telemetry; summary per GPU"),
    "history": CommandInfo("history", "read back recorded telemetry"),
    "doctor": CommandInfo("doctor", "is this node healthy? live, or from saved captures"),
    "watch": CommandInfo("watch", "live view of every GPU with the health verdict, as it changes"),
    "export": CommandInfo("export", "Prometheus endpoint: DCGM-compatible GPU metrics + verdicts"),
    "deploy": CommandInfo("deploy", "Prometheus rules, Grafana dashboards, Kubernetes manifests"),
    "trace": CommandInfo("trace", "PyTorch profiler traces: HTA's numbers and the bottleneck"),
    "fleet": CommandInfo("fleet", "idle GPU-hours and their cost, and GPUs needing attention"),
    "remediate": CommandInfo("remediate", "findings → safe actions on Kubernetes nodes (dry run)"),
    "explain": CommandInfo("explain", "a pasted error, log or nvidia-smi screen: cause and fixes"),
    "catalog": CommandInfo("catalog", "list the GPUs, cloud instances and models gpuwarden knows"),
}
