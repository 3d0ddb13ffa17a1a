"""msgspec Structs for the parts of a Kineto trace the analyses read; every other key is skipped
by msgspec without being decoded into Python objects. Imported only by ``traces.decode``.

Two variants of each Struct: ``STRICT`` with exact types (msgspec decodes typed fields several
times faster than ``Any``) and ``LENIENT`` with ``Any`` fields, used for a batch the strict one
rejects (odd writers; HTA's rules turn odd values into -1 later). ``gc=False``: these objects hold
no cycles, and not tracking 100k+ of them keeps the garbage collector out of decoding.
"""

from dataclasses import dataclass
from typing import Any

import msgspec

from gpuwarden.traces.decode import LEGACY_DEVICES_KEY, META_KEYS

Scalar = int | float | str | None
Number = int | float | None


# (attribute, key in args, strict type, default) — the args the analyses read, in the order
# Kineto writes them (msgspec looks a key up from the field after the last one matched).
_ARGS: tuple[tuple[str, str, Any, Any], ...] = (
    ("external_id", "External id", int | None, -1),
    # kept undecoded (msgspec.Raw, a cheap slice) and decoded only for matmul ops
    ("input_dims", "Input Dims", msgspec.Raw, msgspec.Raw()),
    ("device", "device", int | None, -1),
    ("stream", "stream", int | str | None, -1),  # AMD: "0x0"
    ("correlation", "correlation", int | None, -1),
    ("bytes", "bytes", int | None, -1),
    ("collective_name", "Collective name", str | None, None),
    ("in_msg_nelems", "In msg nelems", int | None, None),
    ("out_msg_nelems", "Out msg nelems", int | None, None),
    ("group_size", "Group size", int | None, None),
    ("dtype", "dtype", str | None, None),
    ("process_group_name", "Process Group Name", str | None, None),
    ("process_group_desc", "Process Group Description", str | None, None),
    ("process_group_ranks", "Process Group Ranks", str | list[int] | None, None),
    ("comms_id", "Comms Id", int | None, None),
    ("memory_bandwidth", "memory bandwidth (GB/s)", float | None, None),
    ("cuda_sync_kind", "cuda_sync_kind", str | None, None),
    ("wait_on_stream", "wait_on_stream", int | None, None),
    ("wait_on_event_corr", "wait_on_cuda_event_record_corr_id", int | None, None),
)


@dataclass(frozen=True)
class Family:
    """The Struct types of one variant and their decoders."""

    no_args: Any  # the shared Args instance of events without args
    trace: msgspec.json.Decoder[Any]
    events: msgspec.json.Decoder[Any]


def _family(strict: bool) -> Family:
    suffix = "Strict" if strict else "Lenient"
    args_type = msgspec.defstruct(
        f"Args{suffix}",
        [
            (
                attr,
                typ if strict or typ is msgspec.Raw else Any,
                msgspec.field(default=default, name=key),
            )
            for attr, key, typ, default in _ARGS
        ],
        frozen=True,
        gc=False,
    )
    no_args = args_type()
    event_type = msgspec.defstruct(
        f"Event{suffix}",
        [  # Kineto's key order
            ("cat", (str | None) if strict else Scalar, None),
            ("name", (str | None) if strict else Scalar, None),
            ("pid", Scalar, -1),
            ("tid", Scalar, -1),
            ("ts", Number if strict else Scalar, None),
            ("dur", Number if strict else Scalar, None),
            ("args", args_type | None, no_args),
        ],
        gc=False,
    )
    trace_type = msgspec.defstruct(
        f"Trace{suffix}",
        [
            ("traceEvents", list[event_type] | None, None),  # type: ignore[valid-type]
            *((key, Any, None) for key in META_KEYS),
        ],
    )
    return Family(
        no_args=no_args,
        trace=msgspec.json.Decoder(trace_type),
        events=msgspec.json.Decoder(list[event_type]),  # type: ignore[valid-type]
    )


STRICT = _family(strict=True)
LENIENT = _family(strict=False)

# only the legacy GPU list of a trace's opening text (everything else skipped undecoded)
LEGACY_DEVICES = msgspec.json.Decoder(
    msgspec.defstruct("LegacyDevices", [(LEGACY_DEVICES_KEY, Any, None)])
)
