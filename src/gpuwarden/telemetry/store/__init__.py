"""The telemetry store: SQLite in WAL mode, the only module that imports sqlite3.

with Store.open(default_db_path()) as store:      # creates or migrates the file
    run = store.begin_run(argv, started_s=t0, host=h, backend="nvml", simulated=False)
    store.write(snapshot)                         # buffered; committed in batches
    store.end_run(run, ended_s=t1, exit_code=0)
Store.open(path, readonly=True).samples(since_s=t0, uuids=["GPU-..."], resolution="1m")
"""

from gpuwarden.telemetry.store.opening import default_db_path
from gpuwarden.telemetry.store.records import (
    RESOLUTIONS,
    DeviceSeries,
    Origin,
    Resolution,
    RunRecord,
    StoredSample,
)
from gpuwarden.telemetry.store.schema import APPLICATION_ID, SCHEMA_VERSION
from gpuwarden.telemetry.store.store import Store

__all__ = [
    "APPLICATION_ID",
    "RESOLUTIONS",
    "SCHEMA_VERSION",
    "DeviceSeries",
    "Origin",
    "Resolution",
    "RunRecord",
    "Store",
    "StoredSample",
    "default_db_path",
]
