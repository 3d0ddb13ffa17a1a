"""`gpuwarden snapshot`: one reading of every GPU as a table or a `gpuwarden.snapshot/1` document.

A GPU in MIG mode gets a second table with one row per MIG device (GI/CI ids, profile, memory,
SMs, the profiling ratios an instance reports, its processes), as nvidia-smi prints them; the
processes holding the GPUs get a third (PID, type, name, GPU memory). A scrape of several nodes
(one GPU 0 per host) adds a host column to each, and a ``host`` to each device in the JSON.

JSON keeps base units (bytes, watts, ratios) with ``null`` for what the backend does not report;
the table shows GiB, percent and MHz. Simulated readings say SIMULATED in the header and the JSON
carries ``"simulated": true``.

The health column and the ``findings`` / ``checks`` of the JSON come from the health rules
(``gpuwarden.health.evaluate``): the table shows each GPU's worst finding above info, and every
finding is listed under it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpuwarden.health.devices import MASKED_UUID
from gpuwarden.health.evaluate import HealthResult
from gpuwarden.report.columns import numbers_table
from gpuwarden.report.findings import SEVERITY_MARK, SEVERITY_STYLE
from gpuwarden.report.output import console, print_json
from gpuwarden.report.snapshot_document import device_host, stamp
from gpuwarden.telemetry.sim import Scenario
from gpuwarden.types.health import CheckStatus, Finding, Severity
from gpuwarden.types.telemetry import (
    DeviceEvent,
    DeviceInfo,
    DeviceSample,
    DeviceState,
    MigDeviceSample,
    ProcessSample,
    Snapshot,
)
from gpuwarden.units import GIB, MIB

SCENARIOS_SCHEMA = "gpuwarden.sim.scenarios/1"
_NONE = "–"


def _num(value: float | None, spec: str = ".0f", suffix: str = "") -> str:
    return _NONE if value is None else f"{format(value, spec)}{suffix}"


def memory_cell(sample: DeviceSample) -> str:
    """ "used/total" GiB as every table shows a GPU's memory (one rounding rule everywhere)."""
    used, total = sample.memory_used_bytes, sample.info.memory_total_bytes
    if used is None:
        return _NONE
    return f"{used / GIB:.1f}/{total / GIB:.1f}" if total else f"{used / GIB:.1f}"


def _power(sample: DeviceSample) -> str:
    draw, limit = sample.power_draw_watts, sample.power_limit_watts
    if draw is None:
        return _NONE
    return f"{draw:.0f}/{limit:.0f}" if limit is not None else f"{draw:.0f}"


def finding_is_about(finding: Finding, info: DeviceInfo) -> bool:
    """Is the finding about this GPU (or one of its MIG instances)? By UUID where the finding's
    UUID names one GPU (not a masked one, which every GPU of a shared capture carries), else by
    index."""
    device = finding.device
    if device is None:
        return False
    if device.uuid is not None and device.uuid != MASKED_UUID:
        return device.uuid == info.uuid
    return device.index == info.index


def verdict_cell(mine: Sequence[Finding]) -> Text:
    """A GPU's findings (most severe first) as one cell: "WARN thermal-slowdown +1", or "ok"."""
    if not mine:
        return Text("ok", style="green")
    worst = mine[0]
    more = f" +{len(mine) - 1}" if len(mine) > 1 else ""
    return Text(
        f"{SEVERITY_MARK[worst.severity]} {worst.code}{more}", style=SEVERITY_STYLE[worst.severity]
    )


# readings a health rule judges a GPU by: with none of them, no finding says nothing
_JUDGED_READINGS = (
    "temperature_gpu_celsius",
    "gpu_utilization_percent",
    "power_draw_watts",
    "clock_event_reasons",
    "ecc_errors_uncorrected_volatile",
    "memory_used_bytes",
)


def _health(sample: DeviceSample, findings: Sequence[Finding] | None) -> Text:
    """The GPU's worst finding above info, "ok", or "–" when the reading holds nothing a rule
    judges (a scrape that only names the GPU: no evidence is no pass)."""
    if findings is None:
        return Text(_NONE)
    mine = [
        f for f in findings if f.severity is not Severity.INFO and finding_is_about(f, sample.info)
    ]
    if not mine and all(getattr(sample, name) is None for name in _JUDGED_READINGS):
        return Text(_NONE)
    return verdict_cell(mine)


def short_name(name: str) -> str:
    """ "NVIDIA H100 80GB HBM3" → "H100 80GB HBM3": the vendor prefix only costs width."""
    for prefix in ("NVIDIA ", "Tesla "):
        name = name.removeprefix(prefix)
    return name


def _row(sample: DeviceSample, findings: Sequence[Finding] | None) -> list[str | Text]:
    """The cells after the GPU's host and index."""
    info = sample.info
    if sample.state is not DeviceState.OK:
        state = Text(sample.state.value.upper(), style="bold red")
        return [short_name(info.name), *[_NONE] * 8, state]
    reasons = [r for r in sample.clock_event_reasons or () if r != "gpu_idle"]
    return [
        short_name(info.name),
        _num(sample.gpu_utilization_percent),
        _num(sample.sm_active_ratio, ".2f"),
        memory_cell(sample),
        _power(sample),
        _num(sample.temperature_gpu_celsius),
        _num(sample.clock_sm_mhz),
        ", ".join(reasons) or ("idle" if sample.clock_event_reasons else _NONE),
        str(len(sample.processes)) if sample.processes is not None else _NONE,
        _health(sample, findings),
    ]


# MIG rows show a pillar column only when some instance reports it (NVML GPM on Hopper+,
# dcgm-exporter's GPU_I_ID series): (MigDeviceSample field, heading)
_MIG_PILLAR_COLUMNS = (
    ("graphics_engine_active_ratio", "GR act"),
    ("sm_active_ratio", "SM act"),
    ("sm_occupancy_ratio", "SM occ"),
    ("tensor_active_ratio", "tensor"),
    ("dram_active_ratio", "DRAM"),
    ("fp64_active_ratio", "FP64"),
    ("fp32_active_ratio", "FP32"),
    ("fp16_active_ratio", "FP16"),
)


def _mig_memory(mig: MigDeviceSample) -> str:
    used, total = mig.memory_used_bytes, mig.memory_total_bytes
    if used is None:
        return _NONE if total is None else f"–/{total / GIB:.1f}"
    return f"{used / GIB:.1f}/{total / GIB:.1f}" if total else f"{used / GIB:.1f}"


def _mig_processes(parent: DeviceSample, mig: MigDeviceSample) -> str:
    """Processes of this GPU/compute instance; "–" when the backend cannot attribute them."""
    processes = parent.processes
    if processes is None or (processes and all(p.gpu_instance_id is None for p in processes)):
        return _NONE
    return str(
        sum(
            p.gpu_instance_id == mig.gpu_instance_id
            and (
                mig.compute_instance_id is None or p.compute_instance_id == mig.compute_instance_id
            )
            for p in processes
        )
    )


def _id(value: int | None) -> str:
    return _NONE if value is None else str(value)


def _hosts_column(samples: Sequence[DeviceSample], hosts: Mapping[str, str] | None) -> bool:
    """A host column only when the devices come from several hosts (GPU 0 of each)."""
    return len({device_host(s, hosts) for s in samples}) > 1


def _lead(sample: DeviceSample, hosts: Mapping[str, str] | None, shown: bool) -> list[str]:
    """The cells that name a GPU: its host (when several) and its index."""
    index = str(sample.info.index)
    return [device_host(sample, hosts) or _NONE, index] if shown else [index]


def mig_table(
    samples: tuple[DeviceSample, ...], hosts: Mapping[str, str] | None = None
) -> Table | None:
    """One row per MIG device under its parent GPU, like nvidia-smi's "MIG devices" table."""
    parents = [s for s in samples if s.mig_devices]
    if not parents:
        return None
    migs = [m for s in parents for m in s.mig_devices or ()]
    pillars = [
        (f, h) for f, h in _MIG_PILLAR_COLUMNS if any(getattr(m, f) is not None for m in migs)
    ]
    with_host = _hosts_column(samples, hosts)
    table = Table(title="MIG devices")
    headings = (
        *(("host",) if with_host else ()),
        *("GPU", "GI", "CI", "profile", "mem GiB", "SMs"),
        *(h for _, h in pillars),
        "procs",
    )
    for column in headings:
        table.add_column(column, justify="left" if column in ("profile", "host") else "right")
    for parent in parents:
        for mig in parent.mig_devices or ():
            table.add_row(
                *_lead(parent, hosts, with_host),
                str(mig.gpu_instance_id),
                _id(mig.compute_instance_id),
                mig.profile or _NONE,
                _mig_memory(mig),
                _id(mig.sm_count),
                *(_num(getattr(mig, f), ".2f") for f, _ in pillars),
                _mig_processes(parent, mig),
            )
    return table


def _process_memory(process: ProcessSample) -> str:
    used = process.used_memory_bytes
    return _NONE if used is None else f"{used / MIB:.0f}"


def process_table(
    samples: tuple[DeviceSample, ...], hosts: Mapping[str, str] | None = None
) -> Table | None:
    """Every process holding a GPU, like nvidia-smi's "Processes" table: GPU (GI/CI under MIG),
    PID, type, name and GPU memory in MiB. None when no backend listed any."""
    listed = [(s, p) for s in samples if s.info.mig_parent_uuid is None for p in s.processes or ()]
    if not listed:
        return None
    with_host = _hosts_column(samples, hosts)
    with_mig = any(p.gpu_instance_id is not None for _, p in listed)
    table = Table(title="processes")
    headings = (
        *(("host",) if with_host else ()),
        "GPU",
        *(("GI", "CI") if with_mig else ()),
        *("PID", "type", "process name", "GPU mem MiB"),
    )
    for column in headings:
        left = column in ("host", "type", "process name")
        table.add_column(column, justify="left" if left else "right", overflow="fold")
    for sample, process in listed:
        table.add_row(
            *_lead(sample, hosts, with_host),
            *((_id(process.gpu_instance_id), _id(process.compute_instance_id)) if with_mig else ()),
            str(process.pid),
            process.kind or _NONE,
            process.name or _NONE,
            _process_memory(process),
        )
    return table


def _mig_label(info: DeviceInfo) -> str:
    """ "1g.10gb (GI 7)" for a MIG instance, "–" for a whole GPU."""
    if info.mig_parent_uuid is None:
        return _NONE
    gi = f" (GI {info.gpu_instance_id})" if info.gpu_instance_id is not None else ""
    return f"{info.mig_profile or '?'}{gi}"


def pod_table(
    samples: tuple[DeviceSample, ...], hosts: Mapping[str, str] | None = None
) -> Table | None:
    """Which Kubernetes pod holds each GPU (dcgm-exporter's pod labels, or the kubelet's
    pod-resources answer): namespace, pod and container, a MIG instance's under its profile.
    None when no reading names a pod."""
    listed = [(s, pod) for s in samples for pod in s.pods or ()]
    if not listed:
        return None
    with_host = _hosts_column(samples, hosts)
    with_mig = any(s.info.mig_parent_uuid is not None for s, _ in listed)
    table = Table(title="pods")
    headings = (
        *(("host",) if with_host else ()),
        "GPU",
        *(("MIG",) if with_mig else ()),
        "namespace",
        "pod",
        "container",
    )
    for column in headings:
        # a pod's name is an identifier to copy whole (kubectl describe pod ...)
        table.add_column(
            column,
            justify="right" if column == "GPU" else "left",
            no_wrap=column == "pod",
            overflow="fold",
        )
    for sample, pod in listed:
        table.add_row(
            *_lead(sample, hosts, with_host),
            *((_mig_label(sample.info),) if with_mig else ()),
            pod.namespace or _NONE,
            pod.pod,
            pod.container or _NONE,
        )
    return table


def header(snapshot: Snapshot) -> Text:
    text = Text()
    if snapshot.simulated:
        text.append("SIMULATED", style="bold reverse yellow")
        text.append(" data, not a real GPU · ")
    parts = [
        snapshot.host.strip(),  # blank when the input names no host (most nvidia-smi outputs)
        f"backend {snapshot.backend}",
        stamp(snapshot.timestamp_s),
        snapshot.source or "",
    ]
    text.append(" · ".join(part for part in parts if part))
    return text


def _print_health(out: Console, health: HealthResult) -> None:
    """Every finding, most severe first, then how many checks could judge this input."""
    for finding in health.findings:
        line = Text()
        line.append(f"{SEVERITY_MARK[finding.severity]:<5}", style=SEVERITY_STYLE[finding.severity])
        line.append(f" {finding.code:<24} {finding.title}")
        out.print(line)
    counts = dict.fromkeys(CheckStatus, 0)
    for check in health.checks:
        counts[check.status] += 1
    judged = ", ".join(f"{counts[s]} {s.value}" for s in CheckStatus)
    lead = "health: no findings" if not health.findings else "health"
    out.print(f"{lead} ({judged} of {len(health.checks)} checks; --json for each check)")


# the columns a narrow terminal leaves out first (the GPU, its name, load, memory, temperature and
# health stay)
_DROP_FIRST = ("procs", "SM MHz", "clock events", "SM act", "power W")


def gpu_table(
    snapshot: Snapshot,
    health: HealthResult | None,
    hosts: Mapping[str, str] | None = None,
    width: int = 120,
) -> Table:
    """One row per GPU (a MIG instance is a row of the MIG table), by host when several, in
    ``width`` characters."""
    # A MIG instance the backend also reports as a device of its own (dcgm-exporter's GPU_I_ID
    # series) is a row of the MIG table under its parent, not a second GPU with the same index.
    gpus = [s for s in snapshot.samples if s.info.mig_parent_uuid is None]
    with_host = _hosts_column(gpus, hosts)
    if with_host:  # each host's GPUs together, hosts in the order the input named them
        order = {h: i for i, h in enumerate(dict.fromkeys(device_host(s, hosts) for s in gpus))}
        gpus.sort(key=lambda s: order[device_host(s, hosts)])
    columns = (
        *(("host",) if with_host else ()),
        "GPU", "name", "util %", "SM act", "mem GiB", "power W",
        "temp °C", "SM MHz", "clock events", "procs", "health",
    )  # fmt: skip
    findings = health.findings if health else None
    rows = [[*_lead(sample, hosts, with_host), *_row(sample, findings)] for sample in gpus]
    return numbers_table(
        columns,
        rows,
        width,
        words={"host", "clock events", "health"},
        drop_first=_DROP_FIRST,
        labels={"name"},
        title="SIMULATED snapshot" if snapshot.simulated else "snapshot",
    )


def _print_events(out: Console, events: Sequence[DeviceEvent]) -> None:
    # Identical events (one per Xid occurrence of a counted burst) print once, with their count.
    repeats: dict[tuple[str, int | None, int | None, str], int] = {}
    for event in events:
        key = (event.kind.value, event.code, event.index, event.message)
        repeats[key] = repeats.get(key, 0) + 1
    for (kind, code, index, message), times in repeats.items():
        where = f"GPU {index}" if index is not None else "backend"
        shown = f" {code}" if code is not None else ""
        many = f" (×{times})" if times > 1 else ""
        out.print(f"event {kind}{shown} on {where}: {message}{many}")


def print_snapshot_table(
    snapshot: Snapshot,
    health: HealthResult | None = None,
    hosts: Mapping[str, str] | None = None,
) -> None:
    """``hosts``: GPU uuid → host, for a scrape of several nodes (a host column then)."""
    out = console()
    out.print(header(snapshot))
    out.print(gpu_table(snapshot, health, hosts, out.width))
    for table in (
        mig_table(snapshot.samples, hosts),
        process_table(snapshot.samples, hosts),
        pod_table(snapshot.samples, hosts),
    ):
        if table is not None:
            out.print(table)
    for sample in snapshot.samples:
        if sample.state is not DeviceState.OK:
            out.print(f"GPU {sample.info.index} {sample.state.value}: {sample.error or ''}")
    if not snapshot.samples:
        out.print("no devices reported")
    if health is not None:
        _print_health(out, health)
    _print_events(out, snapshot.events)


def print_scenarios(scenarios: Mapping[str, Scenario], *, as_json: bool) -> None:
    """`snapshot --backend sim --scenario list`: the simulator's scenarios."""
    if as_json:
        print_json(
            {
                "schema": SCENARIOS_SCHEMA,
                "scenarios": [
                    {
                        "name": s.name,
                        "description": s.description,
                        "gpu": s.gpu_key,
                        "gpus": s.gpus,
                        "faults": [
                            {"kind": f.kind.value, "gpu": f.gpu, "at_s": f.at_s} for f in s.faults
                        ],
                    }
                    for s in scenarios.values()
                ],
            }
        )
        return
    width = max(len(name) for name in scenarios)
    out = console()
    for name, scenario in scenarios.items():
        out.print(f"{name:<{width}}  {scenario.description}")
