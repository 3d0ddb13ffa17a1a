"""GPU thermal thresholds per model: ``data/gpu_thermal.csv`` → ``ThermalThresholds``.

The HW slowdown threshold ("GPU Slowdown Temp", NVML ``NVML_TEMPERATURE_THRESHOLD_SLOWDOWN``) and
the max operating temperature where the driver's SW thermal slowdown starts ("GPU Max Operating
Temp", ``NVML_TEMPERATURE_THRESHOLD_GPU_MAX``) are properties of the board; ``nvidia-smi -q``, its
XML and NVML print them, but dmon, ``--query-gpu`` CSV without the threshold fields and
dcgm-exporter scrapes do not. The file holds what real captures of each model printed (the lowest
where readings disagree), so a capture that states none can still be judged against the model's
own line rather than a generic fallback.

Ada, Hopper and Blackwell boards on R535+ drivers print no absolute threshold: only the margin to
T.Limit ("GPU T.Limit Temp", NVML ``nvmlDeviceGetMarginTemperature``) and the thresholds relative
to it ("GPU Slowdown T.Limit Temp : -2 C" = 2 °C past T.Limit; "GPU Max Operating T.Limit Temp :
0 C": T.Limit is the max operating temperature). Their rows are derived: T.Limit = current
temperature + margin on readings at rest (under load the margin is taken at a hotter sensor than
"GPU Current Temp", so the sum falls below T.Limit), each threshold = T.Limit − its relative value.
Their ``source`` starts with ``DERIVED_FROM_TLIMIT``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from gpuwarden.catalog.gpu_names import words
from gpuwarden.catalog.gpus import gpu_by_smi_name, gpu_catalog, is_cut_name
from gpuwarden.catalog.tables import Row, read_rows

THERMAL_FILE = "gpu_thermal.csv"
# how the source of a row derived from T.Limit-relative readings begins
DERIVED_FROM_TLIMIT = "derived from T.Limit"
_COLUMNS = (
    "smi_name",
    "gpu_key",
    "slowdown_celsius",
    "max_operating_celsius",
    "shutdown_celsius",
    "gpu_readings",
    "drivers",
    "captures",
    "notes",
    "source",
)


@dataclass(frozen=True, slots=True)
class ThermalThresholds:
    """One GPU model's thermal thresholds as its boards print them (None: no capture printed
    one, e.g. Pascal boards have no max operating temperature)."""

    smi_name: str  # the product name nvidia-smi / NVML print ("NVIDIA A10G")
    gpu_key: str | None  # the gpus.csv row, None for a model gpus.csv does not hold
    slowdown_celsius: float | None
    max_operating_celsius: float | None
    shutdown_celsius: float | None
    gpu_readings: int  # GPU blocks read across the captures
    drivers: tuple[str, ...]
    captures: tuple[str, ...]  # the capture files (or public pages) the values come from
    notes: str
    source: str

    @property
    def derived_from_tlimit(self) -> bool:
        """Whether the values were derived from T.Limit margins (current + margin − relative
        threshold) rather than printed as degrees by the captures."""
        return self.source.startswith(DERIVED_FROM_TLIMIT)


def _thresholds(row: Row) -> ThermalThresholds:
    return ThermalThresholds(
        smi_name=row.text("smi_name"),
        gpu_key=row.optional_text("gpu_key") or None,
        slowdown_celsius=row.number("slowdown_celsius"),
        max_operating_celsius=row.number("max_operating_celsius"),
        shutdown_celsius=row.number("shutdown_celsius"),
        gpu_readings=row.required_count("gpu_readings"),
        drivers=row.items("drivers"),
        captures=row.items("captures"),
        notes=row.optional_text("notes"),
        source=row.text("source"),
    )


@cache
def _table() -> tuple[ThermalThresholds, ...]:
    return tuple(_thresholds(row) for row in read_rows(THERMAL_FILE, _COLUMNS))


def thermal_catalog() -> list[ThermalThresholds]:
    """Every model with thresholds on record, in file order."""
    return list(_table())


def thermal_thresholds_for(name: str | None) -> ThermalThresholds | None:
    """The thresholds on record for the GPU a device names itself (nvidia-smi / NVML product
    name, dcgm-exporter's ``modelName``), or None. The name resolves as ``gpu_by_smi_name`` does
    (exact, case and punctuation aside); a model gpus.csv does not hold matches by its words with
    the brand prefixes old and new drivers add or drop ("GeForce RTX 2070" = "NVIDIA GeForce RTX
    2070"). No loose matching: "L40" is never "L40S", a laptop part never its desktop namesake,
    and a name the default table cut to fit its column ("NVIDIA GeForce RTX 3060 ...": a 3060, a
    3060 Ti or a 3060 Laptop GPU) names no model."""
    if not name or is_cut_name(name):
        return None
    spec = gpu_by_smi_name(name)
    if spec is not None:
        return next((t for t in _table() if t.gpu_key == spec.key), None)
    wanted = words(name)
    return next((t for t in _table() if t.gpu_key is None and words(t.smi_name) == wanted), None)


# The vendor prefix drivers added to product names over the years ("GeForce RTX 2070" became
# "NVIDIA GeForce RTX 2070"): a model gpus.csv does not hold is reported with or without it.
_VENDOR_PREFIX = "NVIDIA "


def reported_names(known: ThermalThresholds) -> tuple[str, ...]:
    """The product names a device of this model reports (NVML, nvidia-smi, dcgm-exporter's
    ``modelName``) that ``thermal_thresholds_for`` resolves to ``known``: gpus.csv's nvidia-smi
    names of its row, else its own name with and without the vendor prefix. For rules that
    match the name exactly (Prometheus label matchers), where ``thermal_thresholds_for`` is not
    at hand; only names it resolves to this row are kept, so the two never disagree."""
    spec = (
        next((g for g in gpu_catalog() if g.key == known.gpu_key), None) if known.gpu_key else None
    )
    own = known.smi_name.removeprefix(_VENDOR_PREFIX)
    spellings = spec.smi_names if spec is not None else (own, _VENDOR_PREFIX + own)
    names = dict.fromkeys((known.smi_name, *spellings))
    return tuple(n for n in names if thermal_thresholds_for(n) == known)
