"""driver-probe-failed from the driver's own messages (held-out real logs, tests/data/xid_public):
one node-level finding with what the log said and how often, none for a log without them."""

from __future__ import annotations

from pathlib import Path

from gpuwarden.health.driver_messages import driver_message_findings
from gpuwarden.health.kernel_log import scan_kernel_log
from gpuwarden.types.health import Confidence, Severity

DATA = Path(__file__).resolve().parents[1] / "data" / "xid_public"


def _findings(prefix: str) -> tuple[object, ...]:
    [path] = DATA.glob(f"{prefix}__*")
    return driver_message_findings(scan_kernel_log(path.read_text()), source=f"kernel-log:{path}")


def test_rm_init_adapter_failed_is_a_critical_node_finding() -> None:
    [finding] = _findings("01")
    assert finding.code == "driver-probe-failed" and finding.severity is Severity.CRITICAL
    assert finding.device is None and finding.confidence is Confidence.MEDIUM
    assert "RmInitAdapter failed ×" in finding.title and finding.count
    assert all(e.source.startswith("kernel-log:") for e in finding.evidence)


def test_no_adapter_found_is_the_same_cause() -> None:
    [finding] = _findings("27")
    assert finding.title == "the driver could not take a GPU (no NVIDIA GPU probed ×1)"


def test_xids_alone_are_not_a_probe_failure() -> None:
    scanned = [scan_kernel_log(p.read_text()) for p in sorted(DATA.glob("*.log"))]
    quiet = [r for r in scanned if not any(k.endswith(("probed", "failed")) for k, _ in r.other)]
    assert quiet and all(driver_message_findings(r, source="x") == () for r in quiet)


def test_api_mismatch_is_the_version_mismatch() -> None:
    # a blog's paste of the module refusing a client of another version (tests/data/xid_forum)
    [path] = (DATA.parent / "xid_forum").glob("07__*")
    [finding] = driver_message_findings(scan_kernel_log(path.read_text()), source="kernel-log:x")
    assert finding.code == "nvml-driver-mismatch" and finding.severity is Severity.CRITICAL
    assert finding.confidence is Confidence.MEDIUM and finding.count == 1
