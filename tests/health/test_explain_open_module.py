"""nv-pci.c's three refusals of a GPU, each with the fix its own words point at: the open kernel
module refusing a GPU without a GSP (the proprietary modules take it), R515-R525's open module
refusing a non-data-center GPU (NVreg_OpenRmEnableUnsupportedGpus), a release whose list does not
hold the GPU (another branch)."""

from __future__ import annotations

from pathlib import Path

from gpuwarden.health.explain import explain_text
from tests.health.explain_sets import never_raise

XID23 = Path(__file__).resolve().parent.parent / "data" / "xid_heldout23"


def _first(text: str) -> tuple[str, tuple[str, ...]]:
    (diagnosis, *_) = explain_text(text).diagnoses
    return diagnosis.cause, diagnosis.fixes


def test_the_open_modules_refusal_of_a_gpu_without_gsp_points_at_the_proprietary_modules() -> None:
    """kernel-log set 23's Tesla P4 under TrueNAS's open-module sysext (a real paste)."""
    (paste,) = XID23.glob("01__*.log")
    cause, fixes = _first(paste.read_text())
    assert cause == "driver-probe-failed"
    assert "install the proprietary kernel modules" in fixes[0]
    assert not any("OpenRmEnableUnsupportedGpus" in fix for fix in fixes)


def test_r515s_open_module_refusing_a_geforce_points_at_its_parameter() -> None:
    text = (
        "NVRM: Open nvidia.ko is only ready for use on Data Center GPUs.\n"
        "NVRM: To force use of Open nvidia.ko on other GPUs, see the\n"
        "NVRM: 'OpenRmEnableUnsupportedGpus' kernel module parameter described\n"
    )
    cause, fixes = _first(text)
    assert cause == "driver-probe-failed"
    assert "NVreg_OpenRmEnableUnsupportedGpus=1" in fixes[0]


def test_a_release_that_does_not_list_the_gpu_points_at_another_branch() -> None:
    text = (
        "NVRM: The NVIDIA GPU 0000:02:00.0 (PCI ID: 10de:2331)\n"
        "NVRM: installed in this system is not supported by the\n"
        "NVRM: NVIDIA 575.64.03 driver release.\n"
    )
    cause, fixes = _first(text)
    assert cause == "driver-probe-failed"
    assert "supported-products list" in fixes[0]
    assert not any("proprietary kernel modules" in fix for fix in fixes)


def test_prose_about_open_source_drivers_is_no_refusal() -> None:
    """The nearest look-alike: the words "not supported by open" about other open drivers."""
    text = "Suspend is not supported by open source drivers such as nouveau on this laptop."
    assert "driver-probe-failed" not in [d.cause for d in explain_text(text).diagnoses]


test_the_refusal_fragments_never_raise = never_raise(
    [
        "NVRM: installed in this system is not supported by open",
        "NVRM: nvidia.ko because it does not include the required GPU",
        "Open nvidia.ko is only ready for use on Data Center GPUs",
        "not supported by the NVIDIA 575.64.03 driver release",
    ]
)
