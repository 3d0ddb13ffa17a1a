"""h166: the causes of NVIDIA's video engines (NVENC / NVDEC) and the wordings that name them,
as FFmpeg (libavcodec/nvenc.c, cuviddec.c, nvdec.c; nv-codec-headers' dynlink_loader.h) and the
Video Codec SDK (NvEncoder.cpp, NvDecoder.cpp, as VPF / PyNvVideoCodec print them) write them.
Each reading below got no diagnosis before the codes existed."""

from __future__ import annotations

import pytest

from gpuwarden.health.explain import BY_CODE
from gpuwarden.types.health import Confidence
from tests.health.explain_sets import cause_readings, never_raise

HIGH, MEDIUM, LOW = Confidence.HIGH, Confidence.MEDIUM, Confidence.LOW

_DRIVER_TOO_OLD = (
    "[h264_nvenc @ 000001aedcf7e740] Driver does not support the required nvenc API version. "
    "Required: 12.1 Found: 12.0\n"
    "[h264_nvenc @ 000001aedcf7e740] The minimum required Nvidia driver for nvenc is (unknown) "
    "or newer"
)
_NO_ENCODE_ENGINE = (
    "[h264_nvenc @ 0x1] OpenEncodeSessionEx failed: unsupported device (2)\n"
    "[h264_nvenc @ 0x1] No NVENC capable devices found"
)


@pytest.mark.parametrize(
    ("text", "reading"),
    [
        (_DRIVER_TOO_OLD, ("nvenc-driver-too-old", HIGH)),
        (
            "RuntimeError: LoadNvEncApi : Current Driver Version does not support this "
            "NvEncodeAPI version, please upgrade driver",
            ("nvenc-driver-too-old", HIGH),
        ),
        (_NO_ENCODE_ENGINE, ("video-engine-unsupported", HIGH)),
        (
            "[h264_nvenc @ 0x1] OpenEncodeSessionEx failed: no encode device (1)",
            ("video-engine-unsupported", HIGH),
        ),
        ("[hevc_nvenc @ 0x2] 10 bit encode not supported", ("video-engine-unsupported", HIGH)),
        ("[hevc_nvenc @ 0x2] No capable devices found", ("video-engine-unsupported", MEDIUM)),
        (
            "[hevc_cuvid @ 0x55ca] Codec hevc_cuvid is not supported.",
            ("video-engine-unsupported", MEDIUM),
        ),
        (
            "[h264 @ 0x5] Hardware is lacking required capabilities",
            ("video-engine-unsupported", MEDIUM),
        ),
        ("Codec not supported on this GPU", ("video-engine-unsupported", MEDIUM)),
        (
            "Provided device doesn't support required NVENC features",
            ("video-engine-unsupported", MEDIUM),
        ),
        (
            "[h264_nvenc @ 0x5] OpenEncodeSessionEx failed: out of memory (10): (no details)",
            ("nvenc-session-limit", MEDIUM),
        ),
        (
            "docker compose up\n[h264_nvenc @ 0x5] Cannot load libnvidia-encode.so.1",
            ("container-no-video-capability", HIGH),
        ),
        (
            "[h264_cuvid @ 0x5] Cannot load libnvcuvid.so.1",
            ("container-no-video-capability", MEDIUM),
        ),
        (
            "ImportError: libnvcuvid.so.1: cannot open shared object file: No such file",
            ("container-no-video-capability", MEDIUM),
        ),
    ],
)
def test_each_wording_reads_its_cause(text: str, reading: tuple[str, Confidence]) -> None:
    assert cause_readings(text)[0] == reading, text


def test_the_minimum_driver_line_defers_to_the_line_that_says_why() -> None:
    after_the_library = (
        "[hevc_nvenc @ 0x5] Cannot load libnvidia-encode.so.1\n"
        "[hevc_nvenc @ 0x5] The minimum required Nvidia driver for nvenc is 418.30 or newer"
    )
    assert {c for c, _ in cause_readings(after_the_library)} == {"container-no-video-capability"}
    assert {c for c, _ in cause_readings(_DRIVER_TOO_OLD)} == {"nvenc-driver-too-old"}
    alone = "The minimum required Nvidia driver for nvenc is 470.57.02 or newer"
    assert cause_readings(alone) == [
        ("nvenc-driver-too-old", LOW),
        ("container-no-video-capability", LOW),
    ]


def test_no_capable_device_alone_names_both_candidates_and_what_decides() -> None:
    readings = cause_readings("[hevc_nvenc @ 0x2] No capable devices found")
    assert readings == [("video-engine-unsupported", MEDIUM), ("nvenc-session-limit", LOW)]
    # with the refusal's own status above it, that status decides
    assert [c for c, _ in cause_readings(_NO_ENCODE_ENGINE)] == ["video-engine-unsupported"]


def test_cuda_look_alikes_read_none_of_the_video_causes() -> None:
    video = {"video-engine-unsupported", "nvenc-session-limit", "nvenc-driver-too-old"}
    video.add("container-no-video-capability")
    for text in (
        "[h264_nvenc @ 0x1] No CUDA capable devices found",
        "Codec not supported",  # any library's words, without NVENC's
        "CUDA out of memory. Tried to allocate 20.00 MiB",
        "Cannot load libcuda.so.1",
    ):
        assert not video & {c for c, _ in cause_readings(text)}, text


def test_the_new_causes_are_marked_added_with_docs_and_what_decides() -> None:
    for code in (
        "video-engine-unsupported",
        "nvenc-session-limit",
        "nvenc-driver-too-old",
        "container-no-video-capability",
    ):
        cause = BY_CODE[code]
        assert cause.added and cause.fixes and cause.decides
        assert any("nvidia.com" in r for r in cause.references), code


test_the_new_readings_never_raise = never_raise(
    [
        "OpenEncodeSessionEx failed: unsupported device (2)",
        "OpenEncodeSessionEx failed: out of memory (10)",
        "No NVENC capable devices found",
        "Driver does not support the required nvenc API version. Required: 13.1 Found: 13.0",
        "Cannot load libnvidia-encode.so.1",
        "Codec h264_cuvid is not supported.",
        "docker",
    ]
)
