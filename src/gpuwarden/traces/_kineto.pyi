# Types of the C++ extension built from _kineto.cpp (the simdjson trace scanner).
from collections.abc import Sequence
from typing import Any

SIMDJSON_VERSION: str

class UnsupportedError(Exception): ...

class Scanner:
    def __init__(self, matmul_ops: Sequence[str]) -> None: ...
    def scan(
        self, data: Any, length: int, columns: tuple[Any, ...], event0: int, document: bool, /
    ) -> tuple[
        int,  # events read
        int,  # rows kept
        list[str | None],  # cats met for the first time, in id order
        list[str | None],  # names met for the first time (kept rows), in id order
        list[tuple[int, dict[str, Any]]],  # (row, extra args present) of rows that have some
        list[tuple[int, int, str]],  # (row, column, text): integer args written as text
        int,  # flags: Python types of ts / dur seen
        tuple[int, str, float] | None,  # the first time beyond any clock: (event, field, value)
        dict[str, Any] | None,  # document: its metadata keys
    ]: ...
