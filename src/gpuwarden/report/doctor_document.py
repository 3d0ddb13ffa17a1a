"""`gpuwarden doctor --json`: the `gpuwarden.doctor/1` document (diagnosis.md §3). Apart from
the tables (report/doctor.py) so that the JSON path does not import rich (~20 ms of start-up)."""

from __future__ import annotations

from typing import Any

from gpuwarden.doctor.node import DoctorReport
from gpuwarden.report.findings import check_record, finding_record
from gpuwarden.report.output import print_json
from gpuwarden.report.telemetry_records import device_record
from gpuwarden.types.health import Severity
from gpuwarden.types.schemas import DOCTOR_SCHEMA


def verdict_word(report: DoctorReport) -> str:
    verdict = report.verdict
    if verdict is None:
        return "healthy" if report.judged else "unknown"
    return "critical" if verdict is Severity.CRITICAL else "warning"


def doctor_document(report: DoctorReport) -> dict[str, Any]:
    env = report.environment
    return {
        "schema": DOCTOR_SCHEMA,
        "verdict": verdict_word(report),
        "mode": report.mode,
        "host": report.host,
        "simulated": report.simulated,
        "devices": [
            {**device_record(s), "host": report.host_of(position)}
            for position, s in enumerate(report.samples)
        ],
        "findings": [finding_record(f) for f in report.findings],
        "checks": [check_record(c) for c in report.checks],
        "inputs": [
            {
                "source": i.source,
                "kind": i.kind,
                "detail": i.detail,
                "time_s": i.time_s,
                "time_source": i.time_source,
            }
            for i in report.inputs
        ],
        "skipped": [{"path": s.path, "reason": s.reason} for s in report.skipped],
        "environment": None
        if env is None
        else {
            "platform": env.platform,
            "kernel_module_version": env.kernel_module_version,
            "library_version": env.library_version,
            "nvidia_smi": {
                "present": env.smi.present,
                "returncode": env.smi.returncode,
                "failure": env.smi.failure,
                "driver_version": env.smi.driver_version,
                "cuda_version": env.smi.cuda_version,
            },
            "frameworks": [
                {"name": f.name, "version": f.version, "cuda_version": f.cuda_version}
                for f in env.frameworks
            ],
            "fabric_manager": env.fabric_manager.service_state,
            "in_container": env.container.in_container,
            "notes": list(env.notes),
        },
        "kernel_logs": [
            {
                "source": k.source,
                "lines_scanned": k.report.lines_scanned,
                "xid_lines": k.report.xid_lines,
                "truncated": k.truncated,
            }
            for k in report.kernel_logs
        ],
    }


def print_doctor_json(report: DoctorReport) -> None:
    print_json(doctor_document(report))
