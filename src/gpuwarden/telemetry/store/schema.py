"""The store's on-disk layout: one column per scalar field, the versions and their migrations.

A GPU-sample is one row of ``samples`` (WITHOUT ROWID, keyed by the snapshot's integer
millisecond timestamp, a small device id and the snapshot's id): scalars are REAL/INTEGER
columns (NULL costs one header byte), identity lives once in ``devices``, nested tuples are
compact positional JSON and NULL when absent. ``samples_1m`` / ``samples_1h`` have the same
value columns plus the sample count, keyed by bucket start and device (they summarise a device
over every run that read it).

A snapshot has its own id (v5): two writers may store snapshots in the same millisecond, and
each keeps its samples, origin, run and events (before v5 the time was the key and the later
snapshot replaced the earlier one).

The column list is a literal frozen with the schema version, not derived from the dataclass: a
new ``DeviceSample`` field needs a migration (tests compare both lists).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

# PRAGMA application_id: "GPWD" in ASCII, so `file` and sqlite tools can tell our files apart.
APPLICATION_ID = 0x47505744
APPLICATION_NAME = "gpuwarden.telemetry"


class Agg(StrEnum):
    """How a column is summarised when raw readings are rolled up into a 1 min / 1 h bucket."""

    MEAN = "mean"  # gauges: utilisation, power, clocks, temperatures, rates
    MAX = "max"  # peaks: memory used is sized by its peak, not its mean
    MIN = "min"  # memory free: the low point that goes with the memory-used peak
    LAST = "last"  # counters, limits, modes, nested tuples: the bucket's last reading
    WORST = "worst"  # device state: a minute in which a GPU fell off the bus is not "ok"


class Codec(StrEnum):
    """How a Python value becomes a column value and back."""

    INT = "int"
    FLOAT = "float"
    TEXT = "text"
    BOOL = "bool"
    STATE = "state"  # DeviceState as a small integer ordered by severity
    REASONS = "reasons"  # tuple[str, ...] as a JSON array
    NVLINKS = "nvlinks"  # tuple[NvLinkSample, ...] as a JSON array of positional arrays
    MIG = "mig"
    PROCESSES = "processes"
    EXTRA = "extra"  # dict[str, float] as a JSON object, NULL when empty
    PODS = "pods"  # tuple[PodSample, ...] as a JSON array of positional arrays


_SQL_TYPE = {
    Codec.INT: "INTEGER",
    Codec.FLOAT: "REAL",
    Codec.BOOL: "INTEGER",
    Codec.STATE: "INTEGER",
}


@dataclass(frozen=True, slots=True)
class Column:
    name: str  # the DeviceSample field it holds
    codec: Codec
    agg: Agg

    @property
    def sql_type(self) -> str:
        return _SQL_TYPE.get(self.codec, "TEXT")


def _c(name: str, codec: Codec, agg: Agg) -> Column:
    return Column(name, codec, agg)


INT, F, T, B = Codec.INT, Codec.FLOAT, Codec.TEXT, Codec.BOOL
MEAN, MAX, MIN, LAST = Agg.MEAN, Agg.MAX, Agg.MIN, Agg.LAST

# In DeviceSample field order (after info and timestamp_s): rows rebuild samples positionally.
SAMPLE_COLUMNS: tuple[Column, ...] = (
    _c("state", Codec.STATE, Agg.WORST),
    _c("error", T, LAST),
    _c("memory_used_bytes", INT, MAX),
    _c("memory_free_bytes", INT, MIN),
    _c("memory_reserved_bytes", INT, LAST),
    _c("gpu_utilization_percent", F, MEAN),
    _c("memory_utilization_percent", F, MEAN),
    _c("encoder_utilization_percent", F, MEAN),
    _c("decoder_utilization_percent", F, MEAN),
    _c("temperature_gpu_celsius", F, MEAN),
    _c("temperature_memory_celsius", F, MEAN),
    _c("temperature_slowdown_celsius", F, LAST),
    _c("temperature_shutdown_celsius", F, LAST),
    _c("power_draw_watts", F, MEAN),
    _c("power_limit_watts", F, LAST),
    _c("power_enforced_limit_watts", F, LAST),
    _c("energy_consumed_joules", F, LAST),
    _c("clock_sm_mhz", F, MEAN),
    _c("clock_memory_mhz", F, MEAN),
    _c("clock_graphics_mhz", F, MEAN),
    _c("clock_video_mhz", F, MEAN),
    _c("clock_sm_max_mhz", F, LAST),
    _c("clock_memory_max_mhz", F, LAST),
    _c("pstate", T, LAST),
    _c("fan_speed_percent", F, MEAN),
    _c("clock_event_reasons", Codec.REASONS, LAST),
    _c("power_violation_ns_total", INT, LAST),
    _c("thermal_violation_ns_total", INT, LAST),
    _c("ecc_mode_enabled", B, LAST),
    _c("ecc_errors_corrected_volatile", INT, LAST),
    _c("ecc_errors_uncorrected_volatile", INT, LAST),
    _c("ecc_errors_corrected_aggregate", INT, LAST),
    _c("ecc_errors_uncorrected_aggregate", INT, LAST),
    _c("retired_pages_single_bit", INT, LAST),
    _c("retired_pages_double_bit", INT, LAST),
    _c("retired_pages_pending", B, LAST),
    _c("remapped_rows_correctable", INT, LAST),
    _c("remapped_rows_uncorrectable", INT, LAST),
    _c("remapped_rows_pending", B, LAST),
    _c("remapped_rows_failure", B, LAST),
    _c("pcie_link_gen_current", INT, LAST),
    _c("pcie_link_gen_max", INT, LAST),
    _c("pcie_link_width_current", INT, LAST),
    _c("pcie_link_width_max", INT, LAST),
    _c("pcie_tx_bytes_per_second", F, MEAN),
    _c("pcie_rx_bytes_per_second", F, MEAN),
    _c("pcie_replay_total", INT, LAST),
    _c("nvlinks", Codec.NVLINKS, LAST),
    _c("nvlink_tx_bytes_per_second", F, MEAN),
    _c("nvlink_rx_bytes_per_second", F, MEAN),
    _c("persistence_mode", B, LAST),
    _c("compute_mode", T, LAST),
    _c("mig_mode", B, LAST),
    _c("mig_mode_pending", B, LAST),
    _c("mig_devices", Codec.MIG, LAST),
    _c("processes", Codec.PROCESSES, LAST),
    _c("graphics_engine_active_ratio", F, MEAN),
    _c("sm_active_ratio", F, MEAN),
    _c("sm_occupancy_ratio", F, MEAN),
    _c("tensor_active_ratio", F, MEAN),
    _c("dram_active_ratio", F, MEAN),
    _c("fp64_active_ratio", F, MEAN),
    _c("fp32_active_ratio", F, MEAN),
    _c("fp16_active_ratio", F, MEAN),
    _c("power_average_watts", F, MEAN),
    _c("power_throttled_ratio", F, MEAN),
    _c("thermal_throttled_ratio", F, MEAN),
    _c("xid_last", INT, LAST),
    _c("extra", Codec.EXTRA, LAST),
    _c("pods", Codec.PODS, LAST),
    _c("temperature_margin_celsius", F, MEAN),
    _c("temperature_gpu_max_celsius", F, LAST),
    _c("temperature_memory_max_celsius", F, LAST),
    _c("sram_threshold_exceeded", B, LAST),
    _c("remapped_rows_banks_exhausted", INT, LAST),
    _c("recovery_action", T, LAST),
    _c("fabric_state", T, LAST),
    _c("fabric_status", T, LAST),
    _c("fabric_health_summary", T, LAST),
    _c("fabric_health_issues", Codec.REASONS, LAST),
    _c("vgpu_license_status", T, LAST),
    _c("memory_unrepairable", B, LAST),
    _c("channel_repair_pending", B, LAST),
    _c("tpc_repair_pending", B, LAST),
)

# Columns each migration after v3 appends to every sample table (in SAMPLE_COLUMNS order).
V4_COLUMNS = (
    "temperature_margin_celsius",
    "temperature_gpu_max_celsius",
    "temperature_memory_max_celsius",
    "sram_threshold_exceeded",
    "remapped_rows_banks_exhausted",
    "recovery_action",
    "fabric_state",
    "fabric_status",
)
V6_COLUMNS = ("fabric_health_summary", "fabric_health_issues")
V7_COLUMNS = ("vgpu_license_status",)
V8_COLUMNS = ("memory_unrepairable", "channel_repair_pending", "tpc_repair_pending")

DEVICE_COLUMNS: tuple[str, ...] = (
    "idx",
    "uuid",
    "name",
    "pci_bus_id",
    "serial",
    "vbios_version",
    "architecture",
    "driver_version",
    "cuda_driver_version",
    "memory_total_bytes",
    "mig_parent_uuid",
    "mig_profile",
    "gpu_instance_id",
    "compute_instance_id",
)

_DEVICE_INTEGERS = frozenset(
    {"idx", "memory_total_bytes", "gpu_instance_id", "compute_instance_id"}
)

# Key columns of ``samples``: snapshot time (ms), device, the snapshot's id, the sample's own
# offset from the snapshot time (ms) and where the reading came from (origins). The rollups have
# no snapshot id (a bucket summarises every snapshot in it) and dt_ms is 0 there.
KEY_COLUMNS = ("t_ms", "device_id", "snapshot_id", "dt_ms", "origin_id")
ROLLUP_TABLES = {"1m": ("samples_1m", 60_000), "1h": ("samples_1h", 3_600_000)}
SAMPLE_KEY = ("t_ms", "device_id", "snapshot_id")  # primary key of samples (v5)
ROLLUP_KEY = ("t_ms", "device_id")  # primary key of the rollups, and of samples before v5


def _sample_table_sql(table: str, *, rollup: bool, key: tuple[str, ...]) -> str:
    scalars = ",\n  ".join(f"{c.name} {c.sql_type}" for c in SAMPLE_COLUMNS)
    count = "  n INTEGER NOT NULL,\n" if rollup else ""
    snapshot = "  snapshot_id INTEGER NOT NULL,\n" if "snapshot_id" in key else ""
    return (
        f"CREATE TABLE {table} (\n"
        "  t_ms INTEGER NOT NULL,\n"
        "  device_id INTEGER NOT NULL,\n"
        f"{snapshot}"
        "  dt_ms INTEGER NOT NULL,\n"
        "  origin_id INTEGER NOT NULL,\n"
        f"{count}"
        f"  {scalars},\n"
        f"  PRIMARY KEY ({', '.join(key)})\n"
        ") WITHOUT ROWID"
    )


def _v1(conn: sqlite3.Connection) -> None:
    """Raw readings, identities, runs and events."""
    identity = ",\n  ".join(
        f"{name} {'INTEGER' if name in _DEVICE_INTEGERS else 'TEXT'}" for name in DEVICE_COLUMNS
    )
    statements = [
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
        f"INSERT INTO meta VALUES ('application', '{APPLICATION_NAME}')",
        f"CREATE TABLE devices (\n  id INTEGER PRIMARY KEY,\n  {identity},\n"
        "  identity TEXT NOT NULL UNIQUE\n)",
        "CREATE TABLE origins (id INTEGER PRIMARY KEY, host TEXT NOT NULL, backend TEXT NOT NULL,"
        " simulated INTEGER NOT NULL, source TEXT, identity TEXT NOT NULL UNIQUE)",
        "CREATE TABLE runs (id INTEGER PRIMARY KEY, command TEXT NOT NULL, pid INTEGER,"
        " host TEXT NOT NULL, backend TEXT NOT NULL, simulated INTEGER NOT NULL,"
        " started_ms INTEGER NOT NULL, ended_ms INTEGER, exit_code INTEGER)",
        "CREATE TABLE snapshots (t_ms INTEGER PRIMARY KEY, origin_id INTEGER NOT NULL,"
        " run_id INTEGER)",
        _sample_table_sql("samples", rollup=False, key=ROLLUP_KEY),
        "CREATE TABLE events (id INTEGER PRIMARY KEY, snapshot_ms INTEGER NOT NULL,"
        " t_ms INTEGER NOT NULL, kind TEXT NOT NULL, uuid TEXT, idx INTEGER, code INTEGER,"
        " message TEXT NOT NULL)",
        "CREATE INDEX events_by_time ON events (t_ms)",
    ]
    for statement in statements:
        conn.execute(statement)


def _v2(conn: sqlite3.Connection) -> None:
    """Downsampled tables (1 min, 1 h) and how far each has been rolled up."""
    for table, _ in ROLLUP_TABLES.values():
        conn.execute(_sample_table_sql(table, rollup=True, key=ROLLUP_KEY))
        conn.execute(f"INSERT INTO meta VALUES ('{table}_until_ms', '0')")


def _v3(conn: sqlite3.Connection) -> None:
    """Kubernetes pods per reading (DeviceSample.pods). Tables created by _v1/_v2 of this
    release already have the column (they are built from SAMPLE_COLUMNS)."""
    for table in ("samples", *(t for t, _ in ROLLUP_TABLES.values())):
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if "pods" not in columns:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN pods TEXT")


def _add_missing_columns(conn: sqlite3.Connection, names: tuple[str, ...]) -> None:
    """Append ``names`` to every sample table that lacks them (NULL in the rows already
    there). Tables created by earlier migrations of this release already have them (they are
    built from SAMPLE_COLUMNS), so this does nothing to them."""
    codecs = {c.name: c for c in SAMPLE_COLUMNS}
    for table in ("samples", *(t for t, _ in ROLLUP_TABLES.values())):
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        for name in names:
            if name not in columns:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {codecs[name].sql_type}")


def _v4(conn: sqlite3.Connection) -> None:
    """The health readings (temperature margin and limits, SRAM threshold, remap banks,
    recovery action, fabric state)."""
    _add_missing_columns(conn, V4_COLUMNS)


def _v5(conn: sqlite3.Connection) -> None:
    """Snapshots get their own id, so that two writers storing a snapshot in the same
    millisecond keep both (before, ``snapshots.t_ms`` was the key and ``INSERT OR REPLACE``
    let the later one take the earlier one's place): samples gain ``snapshot_id`` in their key,
    events a ``snapshot_id`` column. Every row is carried over; a sample whose snapshot row was
    replaced gets a snapshot of its own origin, with no run (which run it was is lost already).
    The rollups, which nothing built before, are built from the raw readings (the store now
    keeps them up to date as it writes, rollup.refresh)."""
    from gpuwarden.telemetry.store import rollup  # rollup imports this module

    # v5 rebuilds the tables with this release's SAMPLE_COLUMNS: the columns later migrations
    # add must exist first (NULL, as those migrations would leave them) for the copy and the
    # rollup rebuild.
    _add_missing_columns(conn, tuple(c.name for c in SAMPLE_COLUMNS))
    values = ", ".join(c.name for c in SAMPLE_COLUMNS)
    statements = [
        "ALTER TABLE snapshots RENAME TO snapshots_v4",
        "CREATE TABLE snapshots (id INTEGER PRIMARY KEY, t_ms INTEGER NOT NULL,"
        " origin_id INTEGER NOT NULL, run_id INTEGER)",
        "INSERT INTO snapshots (t_ms, origin_id, run_id)"
        " SELECT t_ms, origin_id, run_id FROM snapshots_v4 ORDER BY t_ms",
        "INSERT INTO snapshots (t_ms, origin_id, run_id)"
        " SELECT t_ms, min(origin_id), NULL FROM samples"
        " WHERE t_ms NOT IN (SELECT t_ms FROM snapshots_v4) GROUP BY t_ms ORDER BY t_ms",
        "DROP TABLE snapshots_v4",
        *SNAPSHOT_INDEXES,
        "ALTER TABLE samples RENAME TO samples_v4",
        _sample_table_sql("samples", rollup=False, key=SAMPLE_KEY),
        f"INSERT INTO samples ({', '.join(KEY_COLUMNS)}, {values})"
        f" SELECT s.t_ms, s.device_id, n.id, s.dt_ms, s.origin_id, "
        + ", ".join(f"s.{c.name}" for c in SAMPLE_COLUMNS)
        + " FROM samples_v4 s JOIN snapshots n ON n.t_ms = s.t_ms",
        "DROP TABLE samples_v4",
        "ALTER TABLE events ADD COLUMN snapshot_id INTEGER",
        "UPDATE events SET snapshot_id ="
        " (SELECT min(id) FROM snapshots WHERE t_ms = events.snapshot_ms)",
        "CREATE INDEX events_by_snapshot ON events (snapshot_id)",
        "DELETE FROM meta WHERE key IN ('samples_1m_until_ms', 'samples_1h_until_ms')",
    ]
    for statement in statements:
        conn.execute(statement)
    rollup.rebuild(conn)


def _v6(conn: sqlite3.Connection) -> None:
    """The NVLink fabric health (summary and the conditions reported present)."""
    _add_missing_columns(conn, V6_COLUMNS)


def _v7(conn: sqlite3.Connection) -> None:
    """The vGPU guest's license state."""
    _add_missing_columns(conn, V7_COLUMNS)


def _v8(conn: sqlite3.Connection) -> None:
    """The R575+ repair readings (unrepairable memory, channel / TPC repair pending)."""
    _add_missing_columns(conn, V8_COLUMNS)


# Looking snapshots up by time (history, replay) and by run (history --run).
SNAPSHOT_INDEXES = (
    "CREATE INDEX snapshots_by_time ON snapshots (t_ms)",
    "CREATE INDEX snapshots_by_run ON snapshots (run_id, t_ms)",
)

# MIGRATIONS[i] takes a file from version i to i + 1; a new file runs all of them in order.
MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (
    _v1,
    _v2,
    _v3,
    _v4,
    _v5,
    _v6,
    _v7,
    _v8,
)
SCHEMA_VERSION = len(MIGRATIONS)

TABLES_BY_VERSION: dict[int, frozenset[str]] = {
    1: frozenset({"meta", "devices", "origins", "runs", "snapshots", "samples", "events"}),
}
TABLES_BY_VERSION[2] = TABLES_BY_VERSION[1] | {"samples_1m", "samples_1h"}
TABLES_BY_VERSION[3] = TABLES_BY_VERSION[2]
TABLES_BY_VERSION[4] = TABLES_BY_VERSION[3]
TABLES_BY_VERSION[5] = TABLES_BY_VERSION[4]
TABLES_BY_VERSION[6] = TABLES_BY_VERSION[5]
TABLES_BY_VERSION[7] = TABLES_BY_VERSION[6]
TABLES_BY_VERSION[8] = TABLES_BY_VERSION[7]
