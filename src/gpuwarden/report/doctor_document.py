"""`gpuwarden doctor --json`: the `gpuwarden.doctor/1` document (diagnosis.md §3). Apart from
the tables (report/doctor.py) so that the JSON path does not import rich (~20 ms of start-up)."""

from __future__ import annotations

from typing import Any

from gpuwarden.doctor.node import DoctorReport
from gpuwarden.report.findings import check_record, finding_record
from gpuwarden.report.output import print_json
from gpuwarden.report.telemetry_records import device_record
from gpuwarden.types.environment import NodeEnvironment
from gpuwarden.types.health import Finding, Severity
from gpuwarden.types.schemas import DOCTOR_SCHEMA


def verdict_word(report: DoctorReport) -> str:
    verdict = report.verdict
    if verdict is None:
        return "healthy" if report.judged else "unknown"
    return "critical" if verdict is Severity.CRITICAL else "warning"


def doctor_document(report: DoctorReport) -> dict[str, Any]:
    env = report.environment
    environment = None if env is None else _environment_record(env)
    if environment is not None and report.several_hosts:
        # several hosts': ``environment`` holds what they all agree on (null where they
        # differ), and each host's own, with whether doctor judged the host (remediate acts on
        # a judged host only: one whose captures read nothing of its health is unknown)
        environment["hosts"] = [
            {"host": host, "judged": host in report.judged_hosts, **_environment_record(own)}
            for host, own in report.host_environments
        ]
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
        "findings": [_finding_record(f, report) for f in report.findings],
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
        "environment": environment,
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


def _finding_record(finding: Finding, report: DoctorReport) -> dict[str, Any]:
    """A finding; among several hosts' with the host it was judged on (a node's finding has no
    device to name it; null: a capture of no known host)."""
    record = finding_record(finding)
    if report.several_hosts:
        record["host"] = finding.host
    return record


def _environment_record(env: NodeEnvironment) -> dict[str, Any]:
    return {
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
    }


def print_doctor_json(report: DoctorReport) -> None:
    print_json(doctor_document(report))
