"""A driver version the paste states against the runtime's "driver version is insufficient"
(health/explain/stated_driver.py): a driver the catalog says runs the CUDA the paste could need
leaves driver-too-old the usual reading, not the stated one, with a library shadowing the
driver's libcuda as a candidate; an older driver, or a check of the exact version, keeps it."""

from __future__ import annotations

from gpuwarden.health.explain import explain_text
from gpuwarden.types.health import Confidence
from tests.health.explain_sets import cause_readings, load_set, never_raise, text_of

HIGH_TOO_OLD = ("driver-too-old", Confidence.HIGH)
USUAL_TOO_OLD = ("driver-too-old", Confidence.MEDIUM)
SHADOW = ("library-conflict", Confidence.LOW)
ERROR_35 = "RuntimeError: CUDA failed with error CUDA driver version is insufficient for CUDA "
ERROR_35 += "runtime version"


def _smi_header(driver: str, cuda: str) -> str:
    return f"| NVIDIA-SMI {driver}    Driver Version: {driver}    CUDA Version: {cuda}     |"


def test_ctranslate2_1988_on_driver_580_reads_the_usual_reading_and_a_shadowing_libcuda() -> None:
    # heldout37: CTranslate2 4.6.3, "nVidia Driver 580.95.05 and CUDA 13.0": 580.95.05 is the
    # driver CUDA 13.0.2 shipped with (cuda_driver.csv)
    text = text_of(
        load_set("heldout37"), "ctranslate2-4-6-3-driver-580-insufficient-title-ct2-1988"
    )
    diagnoses = explain_text(text).diagnoses
    readings = [(d.cause, d.confidence) for d in diagnoses]
    assert readings == [USUAL_TOO_OLD, SHADOW]
    top = diagnoses[0]
    assert top.score == 0.6
    assert any("580.95.05" in e and "runs CUDA 13.0" in e for e in top.evidence)
    assert top.decides is not None and "ldconfig -p | grep libcuda" in top.decides


def test_older_drivers_in_earlier_sets_keep_the_stated_reading() -> None:
    # nvidia-smi's "CUDA Version" is the newest CUDA the driver runs, not the program's: with no
    # other CUDA named, the driver must run the newest family the catalog knows (13.x: R580)
    for name, example_id in (
        ("heldout37", "ctranslate2-4-driver-470-insufficient-ct2-1842"),
        ("heldout7", "driver-insufficient-535-docker-faster-whisper-1278"),
        ("heldout7", "driver-insufficient-error-35-bladebit-431"),
        ("heldout5", "drv-too-old-11040-rtx3050-fooocus-1313"),
    ):
        assert cause_readings(text_of(load_set(name), example_id))[0] == HIGH_TOO_OLD, example_id


def test_the_program_cuda_the_paste_names_decides_what_the_driver_must_run() -> None:
    driver_550 = f"{ERROR_35}\ntorch 2.5.1+cu124\n{_smi_header('550.54.15', '12.4')}"
    assert cause_readings(driver_550)[:2] == [USUAL_TOO_OLD, SHADOW]
    # minor-version compatibility: 535.104.05 runs a CUDA 12.8 runtime (12.x from 525.60.13)
    driver_535 = f"{ERROR_35}\npip: torch 2.7.0+cu128\nNvidia driver version: 535.104.05"
    assert cause_readings(driver_535)[0] == USUAL_TOO_OLD
    # a CUDA 13 build on a 550 driver is the stated case
    cuda_13 = f"{ERROR_35}\ntorch 2.9.0+cu130\n{_smi_header('550.54.15', '12.4')}"
    assert cause_readings(cuda_13) == [HIGH_TOO_OLD]


def test_with_no_cuda_named_the_driver_must_run_the_newest_family() -> None:
    assert cause_readings(f"{ERROR_35}\n{_smi_header('580.65.06', '13.0')}")[0] == USUAL_TOO_OLD
    assert cause_readings(f"{ERROR_35}\n{_smi_header('575.57.08', '12.9')}") == [HIGH_TOO_OLD]


def test_every_wording_of_the_runtime_check_and_of_the_driver_reads_the_same() -> None:
    for error, stated in (
        ("CUDA error: cudaErrorInsufficientDriver", "driver: 590.44.01"),
        ("cuInit failed: CUDA_ERROR_INSUFFICIENT_DRIVER", "NVIDIA-SMI 580.95.05"),
        # PyTorch's wording: the libcuda it found says CUDA 12.2, the driver stated runs 13.x
        (
            "RuntimeError: The NVIDIA driver on your system is too old (found version 12020).",
            "Driver Version: 580.95.05",
        ),
    ):
        assert cause_readings(f"{error}\n{stated}")[0] == USUAL_TOO_OLD, error


def test_checks_of_the_exact_version_and_the_oldest_driver_stated_keep_the_reading() -> None:
    # nvidia-container-cli compares the driver's own CUDA (12.2 for 535) with the image's
    cli = "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8, please "
    cli += "update your driver to a newer version"
    with_cli = f"{ERROR_35}\n{cli}\n{_smi_header('535.104.05', '12.2')}\ntorch 2.7.0+cu128"
    assert cause_readings(with_cli)[0] == HIGH_TOO_OLD
    # of two drivers stated (before and after an upgrade), the older one decides
    two = f"{ERROR_35}\ntorch 2.5.1+cu124\nDriver Version: 470.82.01\nnow Driver Version: 580.95.05"
    assert cause_readings(two) == [HIGH_TOO_OLD]
    # "CUDA Driver Version: 13000" and deviceQuery's "12.2 / 11.8" are CUDA versions, not drivers
    for not_a_driver in (
        "CUDA Driver Version: 13000",
        "CUDA Driver Version / Runtime Version 12.2 / 11.8",
    ):
        assert cause_readings(f"{ERROR_35}\n{not_a_driver}") == [HIGH_TOO_OLD], not_a_driver


def test_a_stated_driver_without_an_error_reads_nothing() -> None:
    assert explain_text(_smi_header("580.95.05", "13.0")).diagnoses == ()


test_the_reading_never_raises = never_raise(
    [
        ERROR_35,
        "cudaErrorInsufficientDriver",
        "Driver Version: 580.95.05",
        "NVIDIA-SMI 999.99.99",
        "driver: 300.1",
        "CUDA Version: 13.0",
        "CUDA 99.9",
        "cu130",
        "unsatisfied condition: cuda>=12.8",
    ]
)


def test_the_blanks_after_driver_are_bounded() -> None:
    """The stated-driver pattern is searched on the flat text today, whose blanks are single;
    on raw text its unbounded blanks were quadratic (20,000 blanks: 2.8 s). Checked without a
    clock (a wall-clock bound fails under load): the blanks between "driver" and its version
    are bounded (8 before a ":" or "=", 8 after it), so a search from "driver" reads at most
    16 of a run of blanks; unbounded, it read the version after any run."""
    from gpuwarden.health.explain.stated_driver import _STATED_DRIVER

    found = [m["version"] for m in _STATED_DRIVER.finditer("driver" + " " * 16 + "535.104.05")]
    assert found == ["535.104.05"]
    assert list(_STATED_DRIVER.finditer("driver" + " " * 17 + "535.104.05")) == []
    assert list(_STATED_DRIVER.finditer("driver" + " " * 200_000 + "x")) == []
