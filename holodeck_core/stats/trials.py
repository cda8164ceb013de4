"""A case's K trials → its status (docs/cli.md)."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

PASS, FAIL, ERROR = "PASS", "FAIL", "ERROR"


class Reducer(StrEnum):
    """How a case's trials decide its status: ``all`` (default) PASS only if every trial
    passed; ``majority`` if more than half did; ``any`` if one did."""

    ALL = "all"
    MAJORITY = "majority"
    ANY = "any"


def reduce_status(statuses: Sequence[str], reducer: Reducer = Reducer.ALL) -> str:
    """PASS, FAIL or ERROR of a case from its trials' statuses. An ERROR trial (after
    retries) makes the case ERROR whatever the reducer."""
    if not statuses:
        raise ValueError("a case has at least one trial")
    if ERROR in statuses:
        return ERROR
    passes = sum(1 for s in statuses if s == PASS)
    needed = {
        Reducer.ALL: len(statuses),
        Reducer.MAJORITY: len(statuses) // 2 + 1,
        Reducer.ANY: 1,
    }[Reducer(reducer)]
    return PASS if passes >= needed else FAIL


def is_flaky(passes: int, trials: int, errors: int = 0) -> bool:
    """Within a run: the trials that ran disagree (an ERROR trial is no verdict, docs/cli.md)."""
    return 0 < passes < trials - errors
