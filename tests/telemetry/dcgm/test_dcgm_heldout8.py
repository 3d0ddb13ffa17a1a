"""An eighth held-out set of dcgm-exporter pages (tests/data/dcgm_public8), sampled as exact-string
searches of the public code index gave them for the driver-version label of each driver branch
(R535-R595) and the 2025-2026 model names (none in shared/fixtures nor the earlier sets): a GB200
series with PCI domain 0008 from a scraper's test, two RTX 5060 Ti power series under one pod,
two EKS H100 nodes' AI-conformance evidence, four T4s with a test's comment lines, an A100 MIG
instance with Slurm job labels; an RTX 3060 line shown as a shell comment under its command and
an RTX 4090 series written a label a line (both refused before, read now); three series listed
without a value (refused), and an RTX PRO 6000 line whose author elided labels with '...'.

``snapshot --backend dcgm --from FILE`` reads the values written down by hand in expected.json;
a page that is no scrape is refused with exit 2; ``doctor --from FILE`` raises nothing above
info on these healthy pages; cut or spliced pages never give a traceback.
"""

from __future__ import annotations

import pytest

from gpuwarden.errors import CorruptInputError
from gpuwarden.telemetry.dcgm import exposition, parse_scrape
from tests.telemetry.dcgm.heldout import load_pages, page_set_checks, refused_check

DATA, ROWS, PAGES = load_pages("dcgm_public8")
READ = [row for row in ROWS if not row.get("refused")]

# The refused pages are healthy too (documents, no fault) but give doctor nothing to judge: the
# no-false-alarm check runs on the pages that read.
(
    test_snapshot_reads_the_values,
    test_doctor_raises_no_false_alarm,
    test_fuzz_cut_pages,
    test_fuzz_spliced_pages,
) = page_set_checks(DATA, READ, PAGES)


test_a_page_that_is_no_scrape_is_refused = refused_check(DATA, ROWS)


def test_a_page_of_one_series_without_a_newline_reads() -> None:
    """A test's raw string: a TYPE line and one series, the text ending on its value."""
    page = DATA / "02__tachometer-scraper-test__gb200-580.105.05-domain-0008-one-series.prom"
    text = page.read_text(encoding="utf-8")
    assert not text.endswith("\n")
    (sample,) = parse_scrape(text, "page", 0.0).snapshot.samples
    assert (sample.info.index, sample.info.pci_bus_id) == (3, "00000008:06:00.0")


_SERIES = 'gpu="0",UUID="GPU-08533397-8c65-7a0b-003b-c4bd120e67c1",Hostname="h"'


@pytest.mark.parametrize(
    "line",
    [
        f"DCGM_FI_DEV_GPU_TEMP {{{_SERIES}}} 60",  # a blank before the label set
        f"DCGM_FI_DEV_GPU_TEMP\t{{{_SERIES}}} 60 1700000000000",  # a tab, then a timestamp
        'DCGM_FI_DEV_GPU_TEMP{ gpu = "0" , UUID = "GPU-08533397-8c65-7a0b-003b-c4bd120e67c1" , '
        'Hostname =\t"h" } 60',  # blanks around each "=" and before "," and "}"
    ],
)
def test_blanks_prometheus_s_text_parser_skips_are_read(line: str) -> None:
    """expfmt's own parser tests hold ``name {labelname="val2"} 0.23`` and
    ``name2{ labelname = "val1" , }``: the same series, read the same."""
    (sample,) = parse_scrape(f"{line}\n", "blanks", 0.0).snapshot.samples
    assert (sample.info.uuid, sample.info.index, sample.temperature_gpu_celsius) == (
        "GPU-08533397-8c65-7a0b-003b-c4bd120e67c1",
        0,
        60.0,
    )


def test_a_listed_series_without_its_value_is_said_to_lack_it() -> None:
    """Prometheus's listing writes a blank between the name and the labels; with no value after
    them the error names what is missing instead of quoting the label set as a number."""
    (page,) = DATA.glob("06__*.prom")
    with pytest.raises(CorruptInputError, match=r"line 1: DCGM_FI_DEV_GPU_UTIL: expected a value"):
        parse_scrape(page.read_text(encoding="utf-8"), "page", 0.0)


_LABEL_A_LINE = [
    "DCGM_FI_DEV_GPU_TEMP {",
    '    gpu="0",',
    '    UUID="GPU-08533397-8c65-7a0b-003b-c4bd120e67c1",',
    '    Hostname="h"',
    "} 60",
]


@pytest.mark.parametrize("between", ["\n", "\n\n"])
def test_a_series_written_a_label_a_line_reads_as_one(between: str) -> None:
    """A document lays a series out a label a line (blank lines between in some renderings)."""
    page = between.join(_LABEL_A_LINE) + "\nDCGM_FI_DEV_POWER_USAGE{" + _SERIES + "} 24.5\n"
    (sample,) = parse_scrape(page, "label a line", 0.0).snapshot.samples
    assert (sample.temperature_gpu_celsius, sample.power_draw_watts) == (60.0, 24.5)


@pytest.mark.parametrize("stop", ["```", "# HELP DCGM_FI_DEV_SM_CLOCK SM clock.", "prose."])
def test_an_open_label_set_ends_at_a_line_that_cannot_go_on_with_it(stop: str) -> None:
    """A fence, a comment or prose after an open label set is where the paste stopped: the
    series is cut there (and said to be), never joined to what follows."""
    page = f"DCGM_FI_DEV_SM_CLOCK{{{_SERIES}}} 300\n" + "\n".join(_LABEL_A_LINE[:3]) + f"\n{stop}\n"
    if stop == "```":
        scrape = parse_scrape(page, "cut", 0.0)
        assert [s.clock_sm_mhz for s in scrape.snapshot.samples] == [300.0]
        assert any("line 2:" in e.message for e in scrape.snapshot.events)
    else:
        with pytest.raises(CorruptInputError, match="line 2: "):
            parse_scrape(page, "damaged", 0.0)


def test_a_label_set_left_open_costs_bounded_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Label lines with no closing brace are joined a bounded number of times, then refused.
    Checked without a clock (a wall-clock bound fails under load): no line the reader scans is
    longer than _MAX_LABEL_LINES + 1 of the page's lines joined. Joined without the bound, the
    series grew by a line at each of the 50,000 (each join copying all of it: quadratic), and
    the line scanned last held them all."""
    scanned: list[int] = []
    scan = exposition._scan_label_set

    def counting(line: str, at: int, inside: bool) -> exposition._LabelSetScan:
        scanned.append(len(line))
        return scan(line, at, inside)

    monkeypatch.setattr(exposition, "_scan_label_set", counting)
    label_line = 'gpu="0",'
    page = "DCGM_FI_DEV_GPU_TEMP{\n" + f"{label_line}\n" * 50_000 + "} 60\n"
    try:
        parse_scrape(page, "open", 0.0)
    except CorruptInputError:
        refused = True
    else:
        refused = False
    longest_line = len("DCGM_FI_DEV_GPU_TEMP{")
    assert 0 < max(scanned) <= (exposition._MAX_LABEL_LINES + 1) * longest_line
    assert refused


_COMMENTED = f"# DCGM_FI_DEV_GPU_UTIL{{{_SERIES}}} 87"


def test_output_shown_as_shell_comments_reads_when_nothing_else_does() -> None:
    """A document prints a command's output as shell comments under it ("# # TYPE" for the
    exporter's own comment line): the only series on the page are commented."""
    command = "$ curl -s localhost:9400/metrics | grep UTIL"
    page = f"{command}\n# # TYPE DCGM_FI_DEV_GPU_UTIL gauge\n{_COMMENTED}\n"
    (sample,) = parse_scrape(page, "commented", 0.0).snapshot.samples
    assert sample.gpu_utilization_percent == 87.0


def test_a_commented_sample_beside_a_live_one_stays_a_comment() -> None:
    """A series a page comments out while others are live is not read (the format's comment)."""
    page = f"{_COMMENTED}\nDCGM_FI_DEV_GPU_TEMP{{{_SERIES}}} 60\n"
    (sample,) = parse_scrape(page, "mixed", 0.0).snapshot.samples
    assert (sample.gpu_utilization_percent, sample.temperature_gpu_celsius) == (None, 60.0)


def test_commented_prose_naming_a_field_is_no_output() -> None:
    page = "# DCGM_FI_DEV_GPU_UTIL is the utilization field\n# see the counters file\n"
    with pytest.raises(CorruptInputError) as raised:
        parse_scrape(page, "prose", 0.0)
    assert raised.value.reference == "dcgm-scrape-no-gpus"
