"""``nvidia-smi -q -x``: the XML report (nvsmi_device_v*.dtd), old and new element names.

The input is untrusted: a document declaring entities is refused before expat sees it (no entity
expansion, no external DTD is ever fetched by ElementTree). A document cut short is read up to
the cut (xml_document), and its reading says so.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import replace

from gpuwarden.errors import naming
from gpuwarden.telemetry.smi import catalog_facts, cells
from gpuwarden.telemetry.smi.builder import (
    DeviceBuilder,
    read_cell,
    said_on_last_gpu,
    snapshot,
    to_vgpu_license_status,
)
from gpuwarden.telemetry.smi.selection import GpuSelection, set_selected_indices
from gpuwarden.telemetry.smi.xml_document import Document, parse_document
from gpuwarden.types.telemetry import (
    MigDeviceSample,
    ProcessSample,
    Snapshot,
)

_ENTITY = re.compile(r"<!ENTITY", re.IGNORECASE)


def _text(node: ET.Element | None, path: str) -> str | None:
    if node is None:
        return None
    found = node.find(path)
    if found is None or found.text is None:
        return None
    return " ".join(found.text.split())


def _first(node: ET.Element, *paths: str) -> str | None:
    for path in paths:
        value = _text(node, path)
        if not cells.is_missing(value):
            return value
    return None


def _first_version(node: ET.Element, *paths: str) -> str | None:
    """The first of the elements holding a version number: nvidia-smi prints words in its
    place too ("Not Found" for the CUDA version when no CUDA driver library is found)."""
    for path in paths:
        version = cells.to_version(_text(node, path))
        if version is not None:
            return version
    return None


# Pre-Ampere XML: single_bit/double_bit totals; Ampere+: SRAM and DRAM counts (summed).
_CORRECTED = ("single_bit/total", "sram_correctable", "dram_correctable")
_UNCORRECTED = (
    "double_bit/total",
    "sram_uncorrectable",
    "sram_uncorrectable_parity",
    "sram_uncorrectable_secded",
    "dram_uncorrectable",
)


# The R575+ repair readings: DeviceSample field and its element under <ecc_errors>.
_REPAIR_TAGS = (
    ("channel_repair_pending", "channel_repair_pending"),
    ("tpc_repair_pending", "tpc_repair_pending"),
    ("memory_unrepairable", "unrepairable_memory"),
)


def _sum_ints(node: ET.Element | None, tags: tuple[str, ...]) -> int | None:
    """Sum of the counters present (Ampere+ splits ECC counts into SRAM and DRAM)."""
    if node is None:
        return None
    values = [cells.to_int(_text(node, tag)) for tag in tags]
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def parse_xml(text: str, source: str, default_timestamp_s: float) -> Snapshot:
    """``read_xml`` of an input named ``source``: its errors name it, its Snapshot carries it."""
    with naming(source):
        return replace(read_xml(text, default_timestamp_s), source=source)


def read_xml(
    text: str, default_timestamp_s: float, *, selection: GpuSelection | None = None
) -> Snapshot:
    """The Snapshot of a `-q -x` document; bad input raises ``cells.SmiOutputError``.
    ``selection``: the GPUs the command's -i selects (the document prints no index)."""
    if _ENTITY.search(text):
        raise cells.SmiOutputError(None, "XML declares entities, refused (untrusted input)")
    document = parse_document(text)
    root = document.root
    if root.tag != "nvidia_smi_log":
        raise cells.SmiOutputError(1, f"XML root is <{root.tag}>, not <nvidia_smi_log>")

    # R615 prints kmd_version / cuda_umd_version beside driver_version / cuda_version, which it
    # says are deprecated and removed in CUDA 14.0 (an XML comment in the R615 output itself)
    driver = _first_version(root, "driver_version", "kmd_version")
    cuda = _first_version(root, "cuda_version", "cuda_umd_version")
    timestamp = cells.parse_smi_time(_text(root, "timestamp"))
    stamp = default_timestamp_s if timestamp is None else timestamp
    builders = []
    for index, gpu in enumerate(root.findall("gpu")):
        builder = DeviceBuilder(index)
        builder.set("driver_version", driver)
        builder.set("cuda_driver_version", cuda)
        builder.note_each(element.text for element in gpu.iter())
        try:
            _fill_gpu(builder, gpu)
        except cells.LineError as exc:
            raise exc.plainly() from None
        builders.append(builder)
    notes = _cut_notes(document, read_any=bool(builders))
    notes += set_selected_indices(builders, selection, cut=document.cut is not None)
    samples = [b.build(stamp) for b in builders]
    events = said_on_last_gpu(samples, notes) if notes else ()
    return snapshot(samples, timestamp_s=stamp, host=None, events=events)


def _cut_notes(document: Document, *, read_any: bool) -> list[str]:
    """What a document cut short left unread, said on its last GPU read (as the -q reader says
    it); a cut before any GPU's name leaves no reading (``read_any``: some GPU was read)."""
    if document.cut is None:
        return []
    note = document.cut.note()
    if not read_any:
        raise cells.SmiOutputError(
            document.cut.line, f"{note}; no GPU reading is left before the cut"
        )
    return [note]


def _fabric_health(b: DeviceBuilder, health: ET.Element | None) -> None:
    """<fabric><health> (R550+): the summary and the elements that report a condition."""
    if health is None:
        return
    b.set("fabric_health_summary", cells.to_fabric_health_summary(_text(health, "summary")))
    conditions = [(issue, _text(health, tag)) for _key, tag, issue in cells.FABRIC_HEALTH_ROWS]
    configuration = _text(health, cells.FABRIC_HEALTH_CONFIGURATION[1])
    b.set("fabric_health_issues", cells.fabric_health_issues(conditions, configuration))


Put = Callable[[str, str | None, Callable[[str | None], object]], None]


def _fill_gpu(b: DeviceBuilder, gpu: ET.Element) -> None:
    def put(name: str, cell: str | None, convert: Callable[[str | None], object]) -> None:
        read_cell(b, name, cell, convert)

    _identity_and_memory(gpu, put)
    _utilization(gpu, put)
    _temperature(b, gpu, put)
    _recovery_and_fabric(b, gpu, put)
    _power(b, gpu, put)
    _clocks(b, gpu, put)
    _ecc_and_memory_health(b, gpu, put)
    _pcie(gpu, put)
    _modes(gpu, put)
    migs = _mig_devices(gpu)
    if migs is not None:
        b.set("mig_devices", catalog_facts.with_profiles(b.get("name"), migs))
    # nvsmi_device_v11 and older have no product_architecture: the catalog knows it by name
    b.set("architecture", catalog_facts.architecture(b.get("name")))
    b.set("processes", _processes(gpu))


def _identity_and_memory(gpu: ET.Element, put: Put) -> None:
    put("uuid", _text(gpu, "uuid"), cells.to_text)
    put("name", _text(gpu, "product_name"), cells.to_text)
    put("pci_bus_id", _first(gpu, "pci/pci_bus_id") or gpu.get("id"), cells.to_text)
    put("serial", _text(gpu, "serial"), cells.to_text)
    put("vbios_version", _text(gpu, "vbios_version"), cells.to_text)
    put("architecture", _text(gpu, "product_architecture"), cells.to_text)
    put("memory_total_bytes", _text(gpu, "fb_memory_usage/total"), cells.to_bytes)
    put("memory_used_bytes", _text(gpu, "fb_memory_usage/used"), cells.to_bytes)
    put("memory_free_bytes", _text(gpu, "fb_memory_usage/free"), cells.to_bytes)
    put("memory_reserved_bytes", _text(gpu, "fb_memory_usage/reserved"), cells.to_bytes)


def _utilization(gpu: ET.Element, put: Put) -> None:
    for field, tag in (
        ("gpu_utilization_percent", "gpu_util"),
        ("memory_utilization_percent", "memory_util"),
        ("encoder_utilization_percent", "encoder_util"),
        ("decoder_utilization_percent", "decoder_util"),
    ):
        put(field, _text(gpu, f"utilization/{tag}"), cells.to_float)


def _recovery_and_fabric(b: DeviceBuilder, gpu: ET.Element, put: Put) -> None:
    put("recovery_action", _text(gpu, "gpu_recovery_action"), cells.to_recovery_action)
    put("fabric_state", _text(gpu, "fabric/state"), cells.to_fabric_state)
    put("fabric_status", _text(gpu, "fabric/status"), cells.to_fabric_status)
    _fabric_health(b, gpu.find("fabric/health"))
    license_status = _text(gpu, "vgpu_software_licensed_product/license_status")
    put("vgpu_license_status", license_status, to_vgpu_license_status)


def _power(b: DeviceBuilder, gpu: ET.Element, put: Put) -> None:
    """R535+ prints <gpu_power_readings> with average/instant draw, older <power_readings>."""
    power = gpu.find("gpu_power_readings")
    if power is None:
        power = gpu.find("power_readings")
    if power is None:
        return
    draw = _first(power, "average_power_draw", "power_draw", "instant_power_draw")
    put("power_draw_watts", draw, cells.to_float)
    put(
        "power_limit_watts",
        _first(power, "requested_power_limit", "power_limit"),
        cells.to_float,
    )
    enforced = _first(power, "current_power_limit", "enforced_power_limit")
    put("power_enforced_limit_watts", enforced, cells.to_float)
    for name, tag in (
        ("power_draw_instant_watts", "instant_power_draw"),
        ("power_default_limit_watts", "default_power_limit"),
        ("power_min_limit_watts", "min_power_limit"),
        ("power_max_limit_watts", "max_power_limit"),
    ):
        try:
            b.set_extra(name, cells.to_float(_text(power, tag)))
        except ValueError as exc:
            raise cells.LineError(None, f"{tag}: {exc}") from None


def _clocks(b: DeviceBuilder, gpu: ET.Element, put: Put) -> None:
    """Clocks, the performance state and fan, and the clock event reasons and counters."""
    for field, tag in (
        ("clock_sm_mhz", "clocks/sm_clock"),
        ("clock_memory_mhz", "clocks/mem_clock"),
        ("clock_graphics_mhz", "clocks/graphics_clock"),
        ("clock_video_mhz", "clocks/video_clock"),
        ("clock_sm_max_mhz", "max_clocks/sm_clock"),
        ("clock_memory_max_mhz", "max_clocks/mem_clock"),
    ):
        put(field, _text(gpu, tag), cells.to_float)
    put("pstate", _text(gpu, "performance_state"), cells.to_text)
    put("fan_speed_percent", _text(gpu, "fan_speed"), cells.to_float)
    _clock_events(b, gpu)
    _clock_event_counters(b, gpu)


def _modes(gpu: ET.Element, put: Put) -> None:
    put("persistence_mode", _text(gpu, "persistence_mode"), cells.to_bool)
    put("compute_mode", _text(gpu, "compute_mode"), cells.to_text)
    put("mig_mode", _text(gpu, "mig_mode/current_mig"), cells.to_bool)
    put("mig_mode_pending", _text(gpu, "mig_mode/pending_mig"), cells.to_bool)


def _temperature(
    b: DeviceBuilder,
    gpu: ET.Element,
    put: Put,
) -> None:
    t = "temperature/"
    put("temperature_gpu_celsius", _text(gpu, t + "gpu_temp"), cells.to_celsius)
    put("temperature_memory_celsius", _text(gpu, t + "memory_temp"), cells.to_celsius)
    # Absolute limits where printed; nvsmi_device_v12+ prints them relative to T.Limit on Ada
    # and newer (*_tlimit_threshold: margins, never degrees; health_readings.TLimitThresholds).
    put("temperature_slowdown_celsius", _text(gpu, t + "gpu_temp_slow_threshold"), cells.to_float)
    put("temperature_shutdown_celsius", _text(gpu, t + "gpu_temp_max_threshold"), cells.to_float)
    put("temperature_gpu_max_celsius", _text(gpu, t + "gpu_temp_max_gpu_threshold"), cells.to_float)
    put(
        "temperature_memory_max_celsius",
        _text(gpu, t + "gpu_temp_max_mem_threshold"),
        cells.to_float,
    )
    put("temperature_margin_celsius", _text(gpu, t + "gpu_temp_tlimit"), cells.to_float)
    try:
        slowdown = cells.to_float(_text(gpu, t + "gpu_temp_slow_tlimit_threshold"))
        shutdown = cells.to_float(_text(gpu, t + "gpu_temp_max_tlimit_threshold"))
    except ValueError as exc:
        raise cells.LineError(None, f"temperature T.Limit thresholds: {exc}") from None
    b.set_tlimit_thresholds(slowdown, shutdown)


def _clock_events(b: DeviceBuilder, gpu: ET.Element) -> None:
    block = gpu.find("clocks_event_reasons")
    if block is None:
        block = gpu.find("clocks_throttle_reasons")
    if block is None or len(block) == 0:
        return
    active: set[str] = set()
    seen = False
    for child in block:
        name = cells.clock_event_name(child.tag)
        if name is None:
            continue
        try:
            state = cells.to_bool(" ".join((child.text or "").split()))
        except ValueError as exc:
            raise cells.LineError(None, f"{child.tag}: {exc}") from None
        if state is None:
            continue
        seen = True
        if state:
            active.add(name)
    if seen:
        b.set("clock_event_reasons", cells.ordered_reasons(active))


def _clock_event_counters(b: DeviceBuilder, gpu: ET.Element) -> None:
    counters = gpu.find("clocks_event_reasons_counters")
    if counters is None:
        return
    thermal: list[int] = []
    try:
        for child in counters:
            value = cells.us_to_ns(" ".join((child.text or "").split()))
            if value is None:
                continue
            if child.tag.endswith("sw_power_cap"):
                b.set("power_violation_ns_total", value)
            # nvsmi_device_v12 spells the tags *_thermal_slowdown, v13 *_therm_slowdown
            elif child.tag.endswith(("thermal_slowdown", "therm_slowdown")):
                thermal.append(value)
    except ValueError as exc:
        raise cells.LineError(None, f"clocks_event_reasons_counters: {exc}") from None
    if thermal:
        b.set("thermal_violation_ns_total", sum(thermal))


def _ecc_and_memory_health(
    b: DeviceBuilder,
    gpu: ET.Element,
    put: Put,
) -> None:
    put("ecc_mode_enabled", _text(gpu, "ecc_mode/current_ecc"), cells.to_bool)
    errors = gpu.find("ecc_errors")
    if errors is not None:
        for scope in ("volatile", "aggregate"):
            node = errors.find(scope)
            try:
                corrected = _sum_ints(node, _CORRECTED)
                uncorrected = _sum_ints(node, _UNCORRECTED)
            except ValueError as exc:
                raise cells.LineError(None, f"ecc_errors/{scope}: {exc}") from None
            b.set(f"ecc_errors_corrected_{scope}", corrected)
            b.set(f"ecc_errors_uncorrected_{scope}", uncorrected)
    retired = "retired_pages"
    put(
        "retired_pages_single_bit",
        _text(gpu, f"{retired}/multiple_single_bit_retirement/retired_count"),
        cells.to_int,
    )
    put(
        "retired_pages_double_bit",
        _text(gpu, f"{retired}/double_bit_retirement/retired_count"),
        cells.to_int,
    )
    # nvsmi_device_v10 drivers print the same flag as pending_blacklist, some of them only that
    pending = _first(gpu, f"{retired}/pending_retirement", f"{retired}/pending_blacklist")
    put("retired_pages_pending", pending, cells.to_bool)
    put(
        "sram_threshold_exceeded",
        _text(gpu, "ecc_errors/aggregate/sram_threshold_exceeded"),
        cells.to_bool,
    )
    # R575+: the repair readings, the last elements of <ecc_errors> ("Yes" / "No" / N/A)
    for name, tag in _REPAIR_TAGS:
        put(name, _text(gpu, f"ecc_errors/{tag}"), cells.to_bool)
    rows = "remapped_rows"
    put(
        "remapped_rows_banks_exhausted",  # banks without a spare row left
        _text(gpu, f"{rows}/row_remapper_histogram/row_remapper_histogram_none"),
        cells.to_int,
    )
    put("remapped_rows_correctable", _text(gpu, f"{rows}/remapped_row_corr"), cells.to_int)
    put("remapped_rows_uncorrectable", _text(gpu, f"{rows}/remapped_row_unc"), cells.to_int)
    put("remapped_rows_pending", _text(gpu, f"{rows}/remapped_row_pending"), cells.to_bool)
    put("remapped_rows_failure", _text(gpu, f"{rows}/remapped_row_failure"), cells.to_bool)


def _pcie(gpu: ET.Element, put: Put) -> None:
    link = "pci/pci_gpu_link_info"
    gen_current = _first(
        gpu, f"{link}/pcie_gen/device_current_link_gen", f"{link}/pcie_gen/current_link_gen"
    )
    put("pcie_link_gen_current", gen_current, cells.to_int)
    put("pcie_link_gen_max", _text(gpu, f"{link}/pcie_gen/max_link_gen"), cells.to_int)
    put(
        "pcie_link_width_current",
        _text(gpu, f"{link}/link_widths/current_link_width"),
        cells.to_int,
    )
    put("pcie_link_width_max", _text(gpu, f"{link}/link_widths/max_link_width"), cells.to_int)
    put("pcie_tx_bytes_per_second", _text(gpu, "pci/tx_util"), cells.to_bytes_per_second)
    put("pcie_rx_bytes_per_second", _text(gpu, "pci/rx_util"), cells.to_bytes_per_second)
    put("pcie_replay_total", _text(gpu, "pci/replay_counter"), cells.to_int)


def _mig_devices(gpu: ET.Element) -> list[tuple[MigDeviceSample, catalog_facts.MigEngines]] | None:
    # nvsmi_device_v11 (every XML capture) has GI/CI ids, SMs, engines and memory per MIG device,
    # but no profile name or UUID element: the profile comes from the catalog (with_profiles).
    nodes = gpu.findall("mig_devices/mig_device")
    if not nodes:
        return None
    devices = []
    try:
        for node in nodes:
            gi = cells.to_int(_text(node, "gpu_instance_id"))
            if gi is None:
                raise ValueError("a MIG device without gpu_instance_id")
            shared = "device_attributes/shared/"
            engines = catalog_facts.MigEngines(
                copy_engines=cells.to_int(_text(node, shared + "copy_engine_count")),
                ofa=cells.to_int(_text(node, shared + "ofa_count")),
            )
            device = MigDeviceSample(
                gpu_instance_id=gi,
                compute_instance_id=cells.to_int(_text(node, "compute_instance_id")),
                profile=cells.to_text(_text(node, "gpu_instance_profile")),
                uuid=cells.to_text(_text(node, "uuid")),
                memory_total_bytes=cells.to_bytes(_text(node, "fb_memory_usage/total")),
                memory_used_bytes=cells.to_bytes(_text(node, "fb_memory_usage/used")),
                sm_count=cells.to_int(_text(node, shared + "multiprocessor_count")),
            )
            devices.append((device, engines))
    except ValueError as exc:
        raise cells.LineError(None, f"mig_devices: {exc}") from None
    return devices


def _holds_text_instead(block: ET.Element) -> bool:
    """The DTD lets a list block hold text instead of its items (``processes (#PCDATA |
    process_info)*``): nvidia-smi prints N/A or [Not Supported] there when the driver cannot
    list them (GeForce boards of older generations), which is no reading, not an empty list."""
    text = " ".join((block.text or "").split())
    return len(block) == 0 and bool(text) and cells.is_missing(text)


def _processes(gpu: ET.Element) -> tuple[ProcessSample, ...] | None:
    block = gpu.find("processes")
    if block is None or _holds_text_instead(block):
        return None
    processes = []
    try:
        for node in block.findall("process_info"):
            pid = cells.to_int(_text(node, "pid"))
            if pid is None:
                raise ValueError("a process without pid")
            processes.append(
                ProcessSample(
                    pid=pid,
                    used_memory_bytes=cells.to_bytes(_text(node, "used_memory")),
                    name=cells.to_text(_text(node, "process_name")),
                    kind=cells.to_text(_text(node, "type")),
                    gpu_instance_id=cells.to_int(_text(node, "gpu_instance_id")),
                    compute_instance_id=cells.to_int(_text(node, "compute_instance_id")),
                )
            )
    except ValueError as exc:
        raise cells.LineError(None, f"processes: {exc}") from None
    return tuple(processes)
