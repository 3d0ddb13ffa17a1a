"""bug_report.scanned_logs on any text: it never raises, finds logs only under the script's own
headers, and loses or repeats no line of the logs it splits (the real cut it was written for is
in tests/health/test_xid_repeats.py)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.doctor.bug_report import scanned_logs

HEADERS = (
    "  /var/log/kern.log:",
    "  journalctl -b -0:",
    "  journalctl -b -1:",
    "  /var/log/dmesg:",
)
LINE = st.one_of(
    st.sampled_from(HEADERS),
    st.sampled_from(
        (
            "[ 12.3] NVRM: Xid (PCI:0000:31:00): 79, GPU has fallen off the bus.",
            "Dec 20 13:22:20 host kernel: NVRM: loading NVIDIA UNIX x86_64 Kernel Module",
            "",
            "  ",
            "  /var/log/kern.log",  # no colon: not a header
        )
    ),
    # no line breaks of any kind (str.splitlines also breaks at \v, \f, \x1c-\x1e, \u2028 ...)
    st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), max_size=60),
)


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(LINE, max_size=40))
def test_the_logs_of_a_scan_paste_keep_every_line_once(lines: list[str]) -> None:
    text = "\n".join(lines)
    logs = scanned_logs("paste", text)
    if not any(line in HEADERS for line in lines):
        assert logs == ()
        return
    kept = [line.strip() for log in logs for line in log.body.splitlines() if line.strip()]
    wanted = [line.strip() for line in lines if line not in HEADERS and line.strip()]
    assert sorted(kept) == sorted(wanted)
    assert [log.name for log in logs if log.name != "paste"] == [
        line.strip().rstrip(":") for line in lines if line in HEADERS
    ]
