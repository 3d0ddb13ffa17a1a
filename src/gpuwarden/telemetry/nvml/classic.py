"""The classic one-value NVML calls behind each batched field, for when the batch cannot answer.

Drivers before R387 (CUDA 9.1's nvml.h is the first with nvmlDeviceGetFieldValues) raise
FunctionNotFound for the whole batch, and a newer driver may answer NotSupported for one entry
that an older call still serves. nvitop (api/libnvml.py) and DCGM read these values through the
classic calls, so the same numbers come out either way, in the field values' units: counts,
ns, mJ, 0/1 flags, NVLink data in KiB. A call that answers "not reported" once is not asked
again for that device (NotSupported does not come and go).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuwarden.telemetry.nvml import fields as fi
from gpuwarden.telemetry.nvml._lib import Nvml

# nvml.h enums
_CORRECTED, _UNCORRECTED = 0, 1  # nvmlMemoryErrorType_t
_VOLATILE, _AGGREGATE = 0, 1  # nvmlEccCounterType_t
_PERF_POLICY_POWER, _PERF_POLICY_THERMAL = 0, 1  # nvmlPerfPolicyType_t
_RETIRED_SBE, _RETIRED_DBE = 0, 1  # nvmlPageRetirementCause_t
_NVLINK_REPLAY, _NVLINK_RECOVERY, _NVLINK_CRC_FLIT = 0, 1, 2  # nvmlNvLinkErrorCounter_t
_UNIT_BYTES = 2  # NVML_NVLINK_COUNTER_UNIT_BYTES
_UTILIZATION_COUNTER = 0  # the counter set nvmlDeviceGetNvLinkUtilizationCounter reads


def _ecc(error: int, counter: int) -> tuple[str, tuple[int, ...]]:
    return "nvmlDeviceGetTotalEccErrors", (error, counter)


# field id -> (call, extra arguments, which part of the answer)
_DEVICE: dict[int, tuple[str, tuple[int, ...], Callable[[Any], Any]]] = {
    fi.FI_ECC_SBE_VOL_TOTAL: (*_ecc(_CORRECTED, _VOLATILE), int),
    fi.FI_ECC_DBE_VOL_TOTAL: (*_ecc(_UNCORRECTED, _VOLATILE), int),
    fi.FI_ECC_SBE_AGG_TOTAL: (*_ecc(_CORRECTED, _AGGREGATE), int),
    fi.FI_ECC_DBE_AGG_TOTAL: (*_ecc(_UNCORRECTED, _AGGREGATE), int),
    fi.FI_RETIRED_SBE: ("nvmlDeviceGetRetiredPages", (_RETIRED_SBE,), len),
    fi.FI_RETIRED_DBE: ("nvmlDeviceGetRetiredPages", (_RETIRED_DBE,), len),
    fi.FI_RETIRED_PENDING: ("nvmlDeviceGetRetiredPagesPendingStatus", (), int),
    fi.FI_PERF_POLICY_POWER: (
        "nvmlDeviceGetViolationStatus",
        (_PERF_POLICY_POWER,),
        lambda v: int(v.violationTime),
    ),
    fi.FI_PERF_POLICY_THERMAL: (
        "nvmlDeviceGetViolationStatus",
        (_PERF_POLICY_THERMAL,),
        lambda v: int(v.violationTime),
    ),
    fi.FI_TOTAL_ENERGY: ("nvmlDeviceGetTotalEnergyConsumption", (), int),
    fi.FI_PCIE_REPLAY: ("nvmlDeviceGetPcieReplayCounter", (), int),
    fi.FI_REMAPPED_COR: ("nvmlDeviceGetRemappedRows", (), lambda r: int(r[0])),
    fi.FI_REMAPPED_UNC: ("nvmlDeviceGetRemappedRows", (), lambda r: int(r[1])),
    fi.FI_REMAPPED_PENDING: ("nvmlDeviceGetRemappedRows", (), lambda r: int(r[2])),
    fi.FI_REMAPPED_FAILURE: ("nvmlDeviceGetRemappedRows", (), lambda r: int(r[3])),
    # FI_MEMORY_TEMP has no classic call: it stays None
}
_LINK_ERRORS = {
    fi.FI_NVLINK_ERROR_DL_REPLAY: _NVLINK_REPLAY,
    fi.FI_NVLINK_ERROR_DL_RECOVERY: _NVLINK_RECOVERY,
    fi.FI_NVLINK_ERROR_DL_CRC: _NVLINK_CRC_FLIT,
}


def classic_link_count(nvml: Nvml, handle: Any) -> int:
    """Links that answer nvmlDeviceGetNvLinkState (up to the library's NVML_NVLINK_MAX_LINKS), as
    nvitop counts them: a link index the device lacks answers NotSupported/InvalidArgument."""
    count = 0
    for link in range(nvml.const("NVML_NVLINK_MAX_LINKS", 18)):
        if nvml.call("nvmlDeviceGetNvLinkState", handle, link) is None:
            break
        count = link + 1
    return count


class ClassicFields:
    """Fills the unanswered entries of one device's field-value reading."""

    def __init__(self, nvml: Nvml, handle: Any) -> None:
        self.nvml = nvml
        self.handle = handle
        self.dead: set[tuple[str, tuple[int, ...]]] = set()  # calls that said "not reported"
        self.bytes_counted: dict[int, bool] = {}  # link -> its utilization counter counts bytes

    def fill(self, ids: list[tuple[int, int]], got: list[Any]) -> list[Any]:
        """``got`` (one value per (field id, link) of ``ids``, None where unanswered) with what
        the classic calls say. May raise DeviceUnusableError."""
        answers: dict[tuple[str, tuple[int, ...]], Any] = {}  # one call per reading
        out = list(got)
        for i, (field_id, link) in enumerate(ids):
            if out[i] is not None:
                continue
            if field_id in _DEVICE:
                function, args, part = _DEVICE[field_id]
                answer = self._ask(function, args, answers)
                out[i] = None if answer is None else part(answer)
            elif field_id == fi.FI_NVLINK_GET_STATE:
                out[i] = self._ask("nvmlDeviceGetNvLinkState", (link,), answers)
            elif field_id in _LINK_ERRORS:
                call = ("nvmlDeviceGetNvLinkErrorCounter", (link, _LINK_ERRORS[field_id]))
                out[i] = self._ask(*call, answers)
            elif field_id in (fi.FI_NVLINK_TX_KIB, fi.FI_NVLINK_RX_KIB):
                out[i] = self._link_kib(link, field_id == fi.FI_NVLINK_TX_KIB, answers)
            # FI_NVLINK_GET_SPEED: no classic call reports a link's speed; it stays None
        return out

    def _ask(
        self,
        function: str,
        args: tuple[int, ...],
        answers: dict[tuple[str, tuple[int, ...]], Any],
    ) -> Any:
        key = (function, args)
        if key in self.dead:
            return None
        if key not in answers:
            answers[key] = self.nvml.call(function, self.handle, *args)
            if answers[key] is None:
                self.dead.add(key)
        return answers[key]

    def _link_kib(
        self, link: int, tx: bool, answers: dict[tuple[str, tuple[int, ...]], Any]
    ) -> float | None:
        """nvmlDeviceGetNvLinkUtilizationCounter (rx, tx), in KiB like the field, only when the
        counter is set to count bytes (nvmlDeviceGetNvLinkUtilizationControl): cycles or packets
        are no data volume. Deprecated on Ampere and newer, where field values answer."""
        counts_bytes = self.bytes_counted.get(link)
        if counts_bytes is None:
            control = self.nvml.call(
                "nvmlDeviceGetNvLinkUtilizationControl", self.handle, link, _UTILIZATION_COUNTER
            )
            counts_bytes = control is not None and int(control.units) == _UNIT_BYTES
            self.bytes_counted[link] = counts_bytes
        if not counts_bytes:
            return None
        got = self._ask(
            "nvmlDeviceGetNvLinkUtilizationCounter", (link, _UTILIZATION_COUNTER), answers
        )
        if got is None:
            return None
        rx, tx_bytes = got
        return float(tx_bytes if tx else rx) / 1024
