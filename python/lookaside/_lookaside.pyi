"""Type stubs of the compiled engine module (the PyO3 bindings)."""

from typing import Any, Callable

__version__: str

class LookasideError(Exception): ...
class TraceError(LookasideError): ...
class ConfigError(LookasideError): ...
class NotYetError(LookasideError): ...

def simulate(
    trace: str,
    config_text: str | None,
    config_name: str,
    tlb: list[str] = ...,
    set: list[str] = ...,
    format: str | None = ...,
    progress: Callable[[int, int], Any] | None = ...,
    reading: str | None = ...,
    max_memory: str | None = ...,
    cache: list[str] = ...,
) -> str: ...
def simulate_many(
    trace: str,
    machines: list[tuple[str | None, str, list[str], list[str]]],
    format: str | None = ...,
    progress: Callable[[int, int], Any] | None = ...,
    max_memory: str | None = ...,
) -> str: ...
def check_machines(
    config_text: str | None,
    config_name: str,
    tlb: list[str],
    sets: list[list[str]],
    max_memory: str | None = ...,
) -> tuple[list[tuple[str, int, int] | None], tuple[int, LookasideError] | None]: ...
def check_config(
    config_text: str | None,
    config_name: str,
    tlb: list[str] = ...,
    set: list[str] = ...,
    max_memory: str | None = ...,
    cache: list[str] = ...,
) -> str: ...
def config_schema() -> str: ...
def config_toml(config_json: str, config_name: str) -> str: ...
def page_bytes(text: str) -> int: ...
def byte_count(text: str) -> int | None: ...
def one_pass_answers(entries: int, ways: int) -> bool: ...
def convert(
    src: str,
    dst: str,
    src_format: str | None = ...,
    dst_format: str | None = ...,
    command: str = ...,
    progress: Callable[[int, int], Any] | None = ...,
    phase: str | None = ...,
    skip: int = ...,
    take: int | None = ...,
    level: int | None = ...,
    extra: dict[str, str] | None = ...,
) -> tuple[int, int]: ...
def info(
    path: str, format: str | None = ..., progress: Callable[[int, int], Any] | None = ...
) -> str: ...
def metadata(path: str, format: str | None = ...) -> str: ...
def access_map(
    path: str,
    page_bytes: int = ...,
    interval: int = ...,
    select: str = ...,
    format: str | None = ...,
    progress: Callable[[int, int], Any] | None = ...,
) -> str: ...
def create_partial(path: str) -> str: ...
def bench(
    plan: str, work_dir: str, say: Callable[[str | None], Any] | None = ...
) -> str: ...
def record(
    src: str,
    via: str,
    dst: str,
    command: str,
    extra: list[tuple[str, str]] = ...,
    level: int | None = ...,
    progress: Callable[[int, int], Any] | None = ...,
) -> str: ...
def table(result_json: str) -> str: ...
def dinero(result_json: str) -> str: ...
def one_pass(
    trace: str,
    config_text: str | None,
    config_name: str,
    tlb: list[str],
    set: list[str],
    format: str | None,
    want: list[tuple[int, int]],
    progress: Callable[[int, int], Any] | None = ...,
) -> tuple[str, dict[str, list[Any]]]: ...
def uhlig94_cells() -> str: ...
def inouye92_results(timing: str = ...) -> str: ...
