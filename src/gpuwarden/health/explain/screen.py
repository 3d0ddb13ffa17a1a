"""A pasted ``nvidia-smi`` screen: what it adds to the diagnosis, and a note per field.

The screen decides between candidates the error text leaves open (error 46 on a GPU whose
screen says MIG enabled, or "E. Process"). Each field it shows gets a note saying what the
value means where it is (P8 at idle, ECC N/A on a GeForce, PCIe downtrained at idle); whether a
value is a problem is the health rules' verdict (``gpuwarden.health.evaluate``), never this
module's: a field a finding names gets that finding's code, a field the rules judged and did
not flag is "ok", a field no rule judges is "info".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpuwarden.health.explain.text import Paste
from gpuwarden.health.explain.votes import Vote
from gpuwarden.types.health import Finding
from gpuwarden.types.telemetry import DeviceSample
from gpuwarden.units import MIB

# Below this GPU utilisation a screen reads as idle (nvidia-smi's 1 s sample; percent).
IDLE_UTILIZATION_PERCENT = 5.0
BUSY_UTILIZATION_PERCENT = 30.0
_EXCLUSIVE = ("Exclusive_Process", "Exclusive_Thread")
_NO_DEVICE_WORDS = ("busy or unavailable", "devicesunavailable", "devices_unavailable")
_DRIVER_WORDS = ("too old", "insufficient for cuda runtime", "insufficient_driver")
# consumer GPUs have no ECC memory: nvidia-smi prints N/A there (not a fault)
_CONSUMER = ("GeForce", "RTX", "TITAN", "Quadro")


@dataclass(frozen=True, slots=True)
class FieldNote:
    """One field of a pasted screen, read."""

    field: str  # the DeviceSample field
    label: str  # as nvidia-smi names it
    value: str  # as read, with its unit
    status: str  # "finding" (a finding names it), "ok" (judged, not flagged), "info"
    note: str  # what the value means here
    codes: tuple[str, ...] = ()  # the findings that name this field


def _gpu(sample: DeviceSample) -> str:
    return f"GPU {sample.info.index} ({sample.info.name})"


def screen_votes(samples: Sequence[DeviceSample], paste: Paste) -> list[Vote]:
    """What the pasted screen says about the error in the same paste."""
    votes: list[Vote] = []
    if paste.mentions(*_NO_DEVICE_WORDS):
        for s in samples:
            if s.mig_mode:
                votes.append(
                    Vote(
                        "mig-no-instances",
                        0.9,
                        f"the pasted nvidia-smi: {_gpu(s)} "
                        "has MIG enabled (CUDA sees only MIG devices)",
                    )
                )
            if s.compute_mode in _EXCLUSIVE:
                votes.append(
                    Vote(
                        "compute-mode-exclusive",
                        0.9,
                        f"the pasted nvidia-smi: {_gpu(s)} is in {s.compute_mode} compute mode",
                    )
                )
    if paste.mentions(*_DRIVER_WORDS):
        for s in samples[:1]:
            if s.info.cuda_driver_version:
                votes.append(
                    Vote(
                        "driver-too-old",
                        0.5,
                        f"the pasted nvidia-smi: driver "
                        f"{s.info.driver_version} runs CUDA up to "
                        f"{s.info.cuda_driver_version}",
                    )
                )
    return votes


# --- notes per field ------------------------------------------------------------------------
Note = Callable[[DeviceSample], "tuple[str, str] | None"]  # → (value, note) or None (not shown)


def _pstate(s: DeviceSample) -> tuple[str, str] | None:
    if s.pstate is None:
        return None
    util = s.gpu_utilization_percent
    if s.pstate in ("P0", "P1"):
        return s.pstate, "maximum performance state: normal while a job runs"
    if s.pstate == "P2":
        return s.pstate, "compute performance state (CUDA work runs at P2 on many GPUs)"
    if util is not None and util <= IDLE_UTILIZATION_PERCENT:
        return (
            s.pstate,
            f"{s.pstate} at idle: normal (the GPU lowers its clocks when it has no work)",
        )
    if util is not None and util >= BUSY_UTILIZATION_PERCENT:
        return s.pstate, (
            f"{s.pstate} while {util:.0f} % busy: held at a low performance state "
            "(power cap, thermal limit or locked clocks)"
        )
    return s.pstate, "a power-saving performance state"


def _temperature(s: DeviceSample) -> tuple[str, str] | None:
    t = s.temperature_gpu_celsius
    if t is None:
        return None
    if t == 0:
        return "0 °C", "no sensor reading (some GPUs and MIG views print 0)"
    limit = s.temperature_slowdown_celsius
    where = f"; the GPU slows down at {limit:.0f} °C" if limit else ""
    return f"{t:.0f} °C", f"GPU core temperature{where}"


def _memory(s: DeviceSample) -> tuple[str, str] | None:
    used, total = s.memory_used_bytes, s.info.memory_total_bytes
    if used is None or total is None or total <= 0:
        return None
    share = used / total
    return (
        f"{used / MIB:,.0f} MiB / {total / MIB:,.0f} MiB",
        f"{share:.0%} of the GPU's memory in use (the CUDA context of each process counts)",
    )


def _utilization(s: DeviceSample) -> tuple[str, str] | None:
    if s.gpu_utilization_percent is None:
        return None
    return (
        f"{s.gpu_utilization_percent:.0f} %",
        "share of the sample period in which a kernel ran (not how many SMs were busy)",
    )


def _power(s: DeviceSample) -> tuple[str, str] | None:
    if s.power_draw_watts is None:
        return None
    cap = s.power_limit_watts
    value = f"{s.power_draw_watts:.0f} W" + (f" / {cap:.0f} W" if cap else "")
    return value, "power draw against the power cap"


def _ecc_mode(s: DeviceSample) -> tuple[str, str] | None:
    consumer = any(word in s.info.name for word in _CONSUMER)
    if s.ecc_mode_enabled is None:
        if consumer:
            return "N/A", "ECC N/A on a GeForce/RTX card: normal (no ECC memory)"
        return None
    if s.ecc_mode_enabled:
        return "On", "ECC enabled: memory errors are corrected or reported"
    return "Off", (
        "ECC disabled: data-center GPUs ship with it on (`nvidia-smi -e 1`, then a reset)"
        if not consumer
        else "ECC off"
    )


def _ecc_errors(s: DeviceSample) -> tuple[str, str] | None:
    count = s.ecc_errors_uncorrected_volatile
    if count is None:
        return None
    return str(count), "uncorrectable ECC errors since the last driver load or reset"


def _persistence(s: DeviceSample) -> tuple[str, str] | None:
    if s.persistence_mode is None:
        return None
    if s.persistence_mode:
        return "On", "the driver stays initialised without clients"
    return "Off", (
        "the driver tears down when no process uses the GPU: the next CUDA start "
        "is slower (nvidia-persistenced fixes it on Linux)"
    )


def _compute_mode(s: DeviceSample) -> tuple[str, str] | None:
    mode = s.compute_mode
    if mode is None:
        return None
    notes = {
        "Default": "any number of processes may use the GPU",
        "Exclusive_Process": "one process at a time: a second one fails with 'all CUDA-capable "
        "devices are busy or unavailable'",
        "Exclusive_Thread": "one thread at a time (deprecated mode)",
        "Prohibited": "no process may create a context on this GPU",
    }
    return mode, notes.get(mode, "compute mode")


def _mig(s: DeviceSample) -> tuple[str, str] | None:
    if s.mig_mode is None:
        return None
    if not s.mig_mode:
        return "Disabled", "MIG disabled: the whole GPU is one CUDA device (normal)"
    count = len(s.mig_devices or ())
    if count:
        return "Enabled", f"MIG enabled with {count} MIG device(s): CUDA sees only those"
    return "Enabled", "MIG enabled: CUDA sees only MIG devices; this screen shows none"


def _fan(s: DeviceSample) -> tuple[str, str] | None:
    if s.fan_speed_percent is None:
        return None
    return f"{s.fan_speed_percent:.0f} %", "fan speed the driver asks for"


def _pcie(s: DeviceSample) -> tuple[str, str] | None:
    gen, top = s.pcie_link_gen_current, s.pcie_link_gen_max
    if gen is None:
        return None
    value = f"Gen{gen}" + (f" of Gen{top}" if top else "")
    if top and gen < top and (s.gpu_utilization_percent or 0) <= IDLE_UTILIZATION_PERCENT:
        return value, "below the maximum at idle: the link downtrains to save power (normal)"
    return value, "PCIe link generation"


def _cuda_version(s: DeviceSample) -> tuple[str, str] | None:
    if not s.info.cuda_driver_version:
        return None
    return (
        s.info.cuda_driver_version,
        "the newest CUDA runtime this driver runs (not the CUDA toolkit installed)",
    )


def _processes(s: DeviceSample) -> tuple[str, str] | None:
    if s.processes is None:
        return None
    if not s.processes:
        return "none", "no process holds a context on this GPU"
    held = [p for p in s.processes if p.used_memory_bytes]
    biggest = max(held, key=lambda p: p.used_memory_bytes or 0) if held else None
    note = f"{len(s.processes)} process(es)"
    if biggest is not None and biggest.used_memory_bytes is not None:
        note += f"; PID {biggest.pid} holds the most ({biggest.used_memory_bytes / MIB:,.0f} MiB)"
    return str(len(s.processes)), note


# (field, nvidia-smi's label, reader, finding codes the health rules raise about it)
FIELDS: tuple[tuple[str, str, Note, tuple[str, ...]], ...] = (
    ("cuda_driver_version", "CUDA Version", _cuda_version, ()),
    ("pstate", "Perf", _pstate, ()),
    ("temperature_gpu_celsius", "Temp", _temperature, ("temperature-high", "thermal-slowdown")),
    ("memory_used_bytes", "Memory-Usage", _memory, ("memory-nearly-full",)),
    ("gpu_utilization_percent", "GPU-Util", _utilization, ()),
    ("power_draw_watts", "Pwr:Usage/Cap", _power, ("power-brake",)),
    ("fan_speed_percent", "Fan", _fan, ()),
    ("ecc_mode_enabled", "ECC mode", _ecc_mode, ()),
    ("ecc_errors_uncorrected_volatile", "Volatile Uncorr. ECC", _ecc_errors,
     ("ecc-uncorrectable",)),
    ("persistence_mode", "Persistence-M", _persistence, ("persistence-off",)),
    ("compute_mode", "Compute M.", _compute_mode, ()),
    ("mig_mode", "MIG M.", _mig, ("mig-no-instances",)),
    ("pcie_link_gen_current", "PCIe Generation", _pcie, ("pcie-link-degraded",)),
    ("processes", "Processes", _processes, ()),
)  # fmt: skip


def _about(finding: Finding, sample: DeviceSample) -> bool:
    device = finding.device
    if device is None:
        return False
    if device.uuid is not None and device.uuid == sample.info.uuid:
        return True
    return device.index is not None and device.index == sample.info.index


def field_notes(
    sample: DeviceSample, findings: Sequence[Finding], *, judged: bool
) -> tuple[FieldNote, ...]:
    """A note per field the screen shows. ``judged``: the health rules ran over this reading
    (else no field is called "ok")."""
    mine = [f for f in findings if _about(f, sample)]
    notes = []
    for field, label, read, codes in FIELDS:
        shown = read(sample)
        if shown is None:
            continue
        named = tuple(
            dict.fromkeys(
                f.code for f in mine if f.code in codes or any(e.field == field for e in f.evidence)
            )
        )
        status = "finding" if named else ("ok" if judged and codes else "info")
        notes.append(FieldNote(field, label, shown[0], status, shown[1], named))
    return tuple(notes)
