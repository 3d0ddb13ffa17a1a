"""A message earlier held-out sets held and explain did not read: yolov5's and ultralytics'
select_device refusing the CUDA devices asked for (utils/torch_utils.py: torch.cuda.is_available()
is False, or fewer devices are seen than asked for). What the source says decides the cause, and
what the message states its confidence. (torch.utils.cpp_extension's "No CUDA runtime is found"
stays unread: test_explain_heldout27 holds that look-alike to no diagnosis.)"""

from __future__ import annotations

from gpuwarden.health.explain import explain_text
from gpuwarden.types.health import Confidence
from tests.health.explain_sets import cause_readings, load_set, never_raise, text_of

LOW = Confidence.LOW
# torch.cuda.is_available() False, as the signatures already read it (cpu-only-build first)
NOT_AVAILABLE = [("cpu-only-build", LOW), ("driver-not-loaded", LOW)]
YOLOV5 = "AssertionError: Invalid CUDA '--device {}' requested, use '--device cpu' or pass valid "
YOLOV5 += "CUDA device(s)"
ULTRALYTICS = (
    "ValueError: Invalid CUDA 'device=0,1' requested. Use 'device=cpu' or pass valid CUDA "
    "device(s) if available, i.e. 'device=0' or 'device=0,1,2,3' for Multi-GPU.\n\n"
    "torch.cuda.is_available(): {}\ntorch.cuda.device_count(): {}\n"
    "os.environ['CUDA_VISIBLE_DEVICES']: None\n"
)


def test_yolov5_8848_device_0_reads_is_available_false() -> None:
    # heldout35 (unknown: the thread does not say why): for device 0 alone select_device's
    # check fails only when torch.cuda.is_available() is False
    text = text_of(load_set("heldout35"), "yolov5-invalid-cuda-device-0-requested-yolov5-8848")
    assert cause_readings(text) == NOT_AVAILABLE
    assert cause_readings(YOLOV5.format("0")) == NOT_AVAILABLE


def test_select_device_with_more_devices_reads_the_count_or_the_build() -> None:
    # yolov5 sets CUDA_VISIBLE_DEVICES to the devices asked for first: "--device 1" on a one-GPU
    # machine hides it, "--device 0,1" needs two
    for device in ("1", "0,1"):
        readings = cause_readings(YOLOV5.format(device))
        assert readings == [("device-ordinal-invalid", LOW), ("cpu-only-build", LOW)], device
    top = explain_text(YOLOV5.format("0,1")).diagnoses[0]
    assert top.decides is not None and "device_count()" in top.decides
    # ultralytics prints both values: True leaves the count, False the build or the driver
    assert cause_readings(ULTRALYTICS.format("True", "1")) == [
        ("device-ordinal-invalid", Confidence.HIGH)
    ]
    assert cause_readings(ULTRALYTICS.format("False", "0")) == NOT_AVAILABLE


def test_other_device_messages_are_not_select_devices() -> None:
    # dorado's index message (heldout5) and an "Invalid CUDA" without the quoted device
    for text in (
        '[error] Invalid CUDA device index "1" from device string ,1,2, there are 1 visible '
        "CUDA devices.",
        "Invalid CUDA version requested",
    ):
        assert "cpu-only-build" not in dict(cause_readings(text)), text


test_the_readings_never_raise = never_raise(
    [
        YOLOV5.format("0"),
        YOLOV5.format("1,2"),
        "Invalid CUDA 'device=",
        "' requested.",
        "torch.cuda.is_available(): True",
        "torch.cuda.is_available(): False",
    ]
)
