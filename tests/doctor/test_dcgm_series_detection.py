"""doctor.captures: which texts are taken for a dcgm-exporter scrape. A series indented or quoted
with "> " counts only as a HELP/TYPE line or a whole sample, so a capture of another kind that
quotes a DCGM field name in code, a config or a query keeps its own kind (review r8a)."""

from __future__ import annotations

import pytest

from gpuwarden.doctor.captures import CaptureKind, classify

_XID = "[ 12.3] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n"


@pytest.mark.parametrize(
    "text",
    [
        # a traceback quoting a field name above the kernel log it came with
        'Traceback (most recent call last):\n  File "x.py", line 3, in <module>\n'
        "    DCGM_FI_DEV_GPU_UTIL = fields[0]\nKeyError: 0\n" + _XID,
        # dcgm-exporter's counters CSV inside a ConfigMap, then the node's kernel log
        "data:\n  dcp-metrics.csv: |\n    DCGM_FI_DEV_SM_CLOCK, gauge, SM clock (in MHz).\n" + _XID,
        # a PromQL alert quoted in a note
        "alert:\n    DCGM_FI_DEV_XID_ERRORS > 0\n" + _XID,
    ],
)
def test_an_indented_field_name_alone_is_no_scrape(text: str) -> None:
    assert classify(text) is CaptureKind.KERNEL_LOG


@pytest.mark.parametrize(
    "text",
    [
        '> DCGM_FI_DEV_POWER_USAGE{gpu="3",UUID="GPU-8"} 24.196\n\nI think it is low.\n',
        "\t\t# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).\n"
        "\t\t# TYPE DCGM_FI_DEV_SM_CLOCK gauge\n",
        '  dcgm_gpu_temp{gpu="0"} 41\n',
        "DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature.\n",  # at a line's start: as before
    ],
)
def test_an_indented_or_quoted_sample_or_help_line_is_a_scrape(text: str) -> None:
    assert classify(text) is CaptureKind.DCGM
