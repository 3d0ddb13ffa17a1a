"""Issue 13, a hostile user's fourth pass: DCGM 4.6's renamed fields on one page.

A page that gives one field under its old and its DCGM 4.6 name with two values (two pages run
together) was read as whichever came first, unsaid: "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS 0"
before "DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL 5" read as a healthy 0. A label under both names
with two values (DCGM_FI_DEV_NAME and DCGM_FI_DEV_GPU_NAME) was the later one. Both are one DCGM
field id, so one reading: two values contradict each other, and the field is not reported, said.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwarden.telemetry.dcgm.scrape import parse_scrape
from tests.cli.test_fuzz_verbs import problem, run_in_process
from tests.conftest import FIXTURES

# A real page (dcgm-exporter on an A100, NVIDIA's docs) as the seed: its labels, its fields
SEED = FIXTURES / "dcgm" / "cloud-native-docs__a100-40gb-mig__dcgm-exporter-2.1.8-2.4.0-rc.2.prom"
LABELS = 'gpu="0",UUID="GPU-34319582-d595-d1c7-d1d2-179bcfa61660",device="nvidia0",Hostname="h"'
# (old name, DCGM 4.6 name, the DeviceSample field)
PAIRS = [
    ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_GPU_TEMP_CELSIUS", "temperature_gpu_celsius"),
    ("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_BOARD_POWER_WATTS", "power_draw_watts"),
    (
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL",
        "remapped_rows_uncorrectable",
    ),
]


def _page(*lines: str) -> str:
    return "".join(f"{line}\n" for line in (f"DCGM_FI_DEV_SM_CLOCK{{{LABELS}}} 1215", *lines))


@pytest.mark.parametrize(("old", "new", "field"), PAIRS, ids=[p[2] for p in PAIRS])
@pytest.mark.parametrize("new_first", [False, True], ids=["old-first", "new-first"])
def test_one_field_under_both_names_with_two_values_is_not_reported(
    old: str, new: str, field: str, new_first: bool
) -> None:
    lines = [f"{old}{{{LABELS}}} 0", f"{new}{{{LABELS}}} 95"]
    scrape = parse_scrape(_page(*(reversed(lines) if new_first else lines)), "page", 1.0)
    sample = scrape.snapshot.samples[0]
    assert getattr(sample, field) is None
    said = [e.message for e in scrape.snapshot.events if "contradicts" in e.message]
    assert len(said) == 1 and old in said[0] and new in said[0], said
    assert sample.clock_sm_mhz == 1215  # the rest of the page is read


@pytest.mark.parametrize(("old", "new", "field"), PAIRS, ids=[p[2] for p in PAIRS])
def test_one_field_under_both_names_with_one_value_is_read(old: str, new: str, field: str) -> None:
    scrape = parse_scrape(_page(f"{old}{{{LABELS}}} 41", f"{new}{{{LABELS}}} 41"), "page", 1.0)
    assert getattr(scrape.snapshot.samples[0], field) == 41
    assert not scrape.snapshot.events


@pytest.mark.parametrize("blank", ["NaN", "9223372036854775794"])  # DCGM's INT64 blank
def test_a_blank_under_one_name_does_not_contradict_a_value_under_the_other(blank: str) -> None:
    old, new, field = PAIRS[0]
    scrape = parse_scrape(_page(f"{new}{{{LABELS}}} {blank}", f"{old}{{{LABELS}}} 41"), "page", 1.0)
    assert getattr(scrape.snapshot.samples[0], field) == 41
    assert not [e for e in scrape.snapshot.events if "contradicts" in e.message]


@pytest.mark.parametrize("order", [0, 1])
def test_a_label_under_both_names_with_two_values_names_nothing(order: int) -> None:
    names = ['DCGM_FI_DEV_NAME="NVIDIA A100-SXM4-40GB"', 'DCGM_FI_DEV_GPU_NAME="Tesla T4"']
    labels = f'gpu="0",UUID="GPU-a",{names[order]},{names[1 - order]}'
    scrape = parse_scrape(f"DCGM_FI_DEV_GPU_TEMP{{{labels}}} 40\n", "page", 1.0)
    assert scrape.snapshot.samples[0].info.name == ""


def test_a_label_under_both_names_with_one_value_is_read() -> None:
    labels = 'gpu="0",UUID="GPU-a",DCGM_FI_DEV_NAME="Tesla T4",DCGM_FI_DEV_GPU_NAME="Tesla T4"'
    scrape = parse_scrape(f"DCGM_FI_DEV_GPU_TEMP{{{labels}}} 40\n", "page", 1.0)
    assert scrape.snapshot.samples[0].info.name == "Tesla T4"


def test_a_real_page_with_a_contradicting_renamed_copy_keeps_the_promise(tmp_path: Path) -> None:
    """The seed page, then its temperatures again under DCGM 4.6's name, 30 °C hotter: doctor
    and snapshot read the rest, and say the temperature is unknown."""
    seed = SEED.read_text()
    hotter = [
        line.replace("DCGM_FI_DEV_GPU_TEMP{", "DCGM_FI_DEV_GPU_TEMP_CELSIUS{").rsplit(" ", 1)
        for line in seed.splitlines()
        if line.startswith("DCGM_FI_DEV_GPU_TEMP{")
    ]
    assert hotter
    page = tmp_path / "two-exporters.prom"
    page.write_text(seed + "".join(f"{s} {float(v) + 30:g}\n" for s, v in hotter))
    for verb in (["snapshot", "--backend", "dcgm"], ["doctor"]):
        outcome = run_in_process([*verb, "--from", str(page), "--json"])
        assert problem(outcome) is None and outcome.code == 0, outcome.err
    snapshot = json.loads(
        run_in_process(["snapshot", "--backend", "dcgm", "--from", str(page), "--json"]).out
    )
    assert snapshot["devices"][0]["temperature_gpu_celsius"] is None
    assert snapshot["devices"][0]["clock_sm_mhz"] == 1215
    assert [e for e in snapshot["events"] if "contradicts DCGM_FI_DEV_GPU_TEMP = " in e["message"]]
