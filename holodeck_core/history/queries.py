"""Read-side queries: run lookup, run listings, ``compare`` and the guarded ``sql`` command.

Every function takes an open (read-only) connection (a user's own SQL is
:func:`holodeck_core.history.sql.run_select`'s).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from holodeck_core.defaults import ALPHA
from holodeck_core.errors import ConfigError
from holodeck_core.history.health import refuse_failed
from holodeck_core.history.paired import PairedRuns, compare_paired
from holodeck_core.history.tabular import literal
from holodeck_core.naming import slugify
from holodeck_core.stats import Verdict
from holodeck_core.stats.multiple import Adjustment

if TYPE_CHECKING:
    import duckdb

MIN_PREFIX = 4
RUN_COLUMNS = (
    "run_id", "agent_name", "agent_slug", "prompt_version", "model_candidate",
    "model_fingerprint", "trigger", "model_name",
    "finished_at", "total_tests", "passed", "failed", "errored", "pass_rate", "total_tokens",
    "cost_usd", "dataset_hash", "wall_time_ms", "source_path", "batch_calls", "batch_usd",
)  # fmt: skip
RUNS_WITH_COSTS = "eval_runs LEFT JOIN run_costs USING (run_id)"
"""A run with its ``run_costs`` row (what batches answered: docs/cost.md), if it has one."""


def configuration(run: dict[str, Any]) -> str:
    """A run's configuration as people read it: agent · prompt version · model candidate."""
    return f"{run['agent_slug']} · {run['prompt_version']} · {run['model_candidate']}"


def _dicts(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    columns = [d[0] for d in cursor.description or []]
    return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def resolve_run(con: duckdb.DuckDBPyConnection, ref: str) -> str:
    """A run id from a full id or a unique prefix (at least 4 characters)."""
    exact = con.execute("SELECT run_id FROM eval_runs WHERE run_id = ?", [ref]).fetchall()
    if exact:
        return str(exact[0][0])
    if len(ref) < MIN_PREFIX:
        raise ConfigError(f"run {ref!r} not found (a prefix needs {MIN_PREFIX}+ characters)")
    rows = con.execute(
        "SELECT run_id FROM eval_runs WHERE starts_with(run_id, ?) ORDER BY run_id LIMIT 6",
        [ref],
    ).fetchall()
    if not rows:
        raise ConfigError(f"run {ref!r} not found; `holodeck history runs` lists them")
    if len(rows) > 1:
        shown = ", ".join(str(r[0])[:16] for r in rows[:5])
        raise ConfigError(f"run prefix {ref!r} is ambiguous ({shown}, ...); give more of it")
    return str(rows[0][0])


def list_runs(
    con: duckdb.DuckDBPyConnection,
    *,
    agent: str | None = None,
    prompt_version: str | None = None,
    limit: int = 20,
) -> list[dict[str, Any]]:
    """Most recent runs first. Literals, not bound parameters: DuckDB 1.5 imports pandas
    for any bound Python value, 0.7 s of a `history runs` that needs none of it."""
    name, version = literal(agent), literal(prompt_version)
    return _dicts(
        con.execute(
            f"SELECT {', '.join(RUN_COLUMNS)} FROM {RUNS_WITH_COSTS} "
            f"WHERE ({name} IS NULL OR agent_slug = {name} OR agent_name = {name}) "
            f"AND ({version} IS NULL OR prompt_version = {version}) "
            f"ORDER BY finished_at DESC, run_id DESC LIMIT {int(limit)}"
        )
    )


FAILED_RUN_COLUMNS = (
    "dagster_run_id",
    "job_name",
    "agent_slug",
    "prompt_version",
    "model_candidate",
    "partition_key",
    "trigger",
    "failed_at",
    "error",
)


def list_failed_runs(
    con: duckdb.DuckDBPyConnection,
    *,
    agent: str | None = None,
    prompt_version: str | None = None,
    limit: int = 20,
) -> list[dict[str, Any]]:
    """Orchestrated runs that failed before writing an EvalRun (``failed_runs``, recorded by
    the Dagster run-failure sensor; docs/history.md), a row per cell, newest first; ``agent``
    (a name or slug) and ``prompt_version`` (also a row's partition key, for a row that names
    no cell) select as in :func:`list_runs`. Each row also has its ``configuration`` as people
    read it (``agent · prompt version · model candidate``, else the partition it ran)."""
    slug, version = literal(slugify(agent) if agent else None), literal(prompt_version)
    rows = _dicts(
        con.execute(
            f"SELECT {', '.join(FAILED_RUN_COLUMNS)} FROM failed_runs "
            f"WHERE ({slug} IS NULL OR agent_slug = {slug}) "
            f"AND ({version} IS NULL OR {version} IN (prompt_version, partition_key)) "
            f"ORDER BY failed_at DESC, dagster_run_id DESC, model_candidate, prompt_version "
            f"LIMIT {int(limit)}"
        )
    )
    return [{**row, "configuration": _failed_configuration(row)} for row in rows]


def _failed_configuration(row: dict[str, Any]) -> str:
    """How a failed run's row is named: its configuration (:func:`configuration`), else the
    partition it ran (a row that names no cell)."""
    if row["prompt_version"] is None:
        return str(row["partition_key"] or "-")
    return configuration({**row, "agent_slug": row["agent_slug"] or "-"})


@dataclass
class RunDetail:
    run: dict[str, Any]
    cases: list[dict[str, Any]]
    metrics: list[dict[str, Any]]
    errors: list[dict[str, Any]]


def run_detail(con: duckdb.DuckDBPyConnection, run_id: str) -> RunDetail:
    run = _dicts(
        con.execute(
            "SELECT v.*, k.batch_calls, k.batch_usd FROM v_runs v "
            "LEFT JOIN run_costs k USING (run_id) WHERE run_id = ?",
            [run_id],
        )
    )[0]
    cases = _dicts(
        con.execute(
            "SELECT case_id, test_name, status, execution_time_ms, total_tokens, errors "
            "FROM test_results WHERE run_id = ? ORDER BY case_index",
            [run_id],
        )
    )
    metrics = _dicts(
        con.execute(
            "SELECT case_id, turn_index, metric_name, score, raw_score, unit, threshold, "
            "passed, error FROM metric_results WHERE run_id = ? "
            "ORDER BY case_id, turn_index NULLS FIRST, metric_index",
            [run_id],
        )
    )
    errors = _dicts(
        con.execute(
            "SELECT case_id, source, name, message FROM v_errors WHERE run_id = ? "
            "ORDER BY case_id, source",
            [run_id],
        )
    )
    return RunDetail(run=run, cases=cases, metrics=metrics, errors=errors)


# --------------------------------------------------------------------------- compare


@dataclass(frozen=True)
class CaseFlip:
    case_id: str
    test_name: str | None
    status_a: str
    status_b: str

    @property
    def regression(self) -> bool:
        return self.status_a == "PASS" and self.status_b in ("FAIL", "ERROR")


@dataclass(frozen=True)
class MetricDelta:
    metric_name: str
    unit: str | None
    direction: str
    n_a: int
    n_b: int
    mean_a: float | None
    mean_b: float | None
    pass_rate_a: float | None
    pass_rate_b: float | None

    @property
    def delta(self) -> float | None:
        if self.mean_a is None or self.mean_b is None:
            return None
        return self.mean_b - self.mean_a

    @property
    def worse(self) -> bool:
        delta = self.delta
        if delta is None:
            return False
        return delta > 0 if self.direction == "lower_is_better" else delta < 0


@dataclass
class Comparison:
    """Run B measured against run A on the cases both ran."""

    a: dict[str, Any]
    b: dict[str, Any]
    max_drop: float
    common_cases: int
    only_in_a: list[str]
    only_in_b: list[str]
    passed_a: int
    passed_b: int
    flips: list[CaseFlip]
    metrics: list[MetricDelta]
    tokens_common_a: int | None
    tokens_common_b: int | None
    warnings: list[str] = field(default_factory=list)
    paired: PairedRuns | None = None
    strict: bool = False
    """``--strict``: any case that passed in A and not in B is a regression (the any-flip
    rule); otherwise only a significant drop of the paired comparison is (docs/architecture.md)."""

    @property
    def configuration_a(self) -> str:
        return configuration(self.a)

    @property
    def configuration_b(self) -> str:
        return configuration(self.b)

    @property
    def pass_rate_a(self) -> float:
        """A's pass rate over its whole test set (what a CI gate reads)."""
        return float(self.a["pass_rate"])

    @property
    def pass_rate_b(self) -> float:
        return float(self.b["pass_rate"])

    @property
    def pass_rate_drop(self) -> float:
        return self.pass_rate_a - self.pass_rate_b

    @property
    def common_pass_rate_a(self) -> float:
        """A's pass rate on the cases both runs have."""
        return self.passed_a / self.common_cases if self.common_cases else 0.0

    @property
    def common_pass_rate_b(self) -> float:
        return self.passed_b / self.common_cases if self.common_cases else 0.0

    @property
    def flaky(self) -> list[str]:
        return self.paired.flaky if self.paired else []

    def paired_metric_lines(self) -> list[str]:
        """Each shared metric's paired verdict, its differences in the metric's unit."""
        units = {m.metric_name: m.unit or "" for m in self.metrics}
        tests = self.paired.metrics.items() if self.paired else []
        return [
            f"{name}: {test.render(percent=False, unit=units.get(name, ''))}"
            for name, test in tests
        ]

    @property
    def regressions(self) -> list[CaseFlip]:
        """Cases that passed in A and not in B; without ``strict``, known-flaky ones apart."""
        flaky = set() if self.strict else set(self.flaky)
        return [flip for flip in self.flips if flip.regression and flip.case_id not in flaky]

    @property
    def reasons(self) -> list[str]:
        """Why this is a regression (empty: it is not)."""
        if not self.strict and self.paired is not None:
            test = self.paired.pass_fraction
            drop = -(test.mean_diff or 0.0)
            if test.verdict is Verdict.REGRESSION and drop > self.max_drop + 1e-12:
                return [f"the pass fraction fell significantly: {test.render()}"]
            return []
        found = []
        if self.regressions:
            found.append(f"{len(self.regressions)} case(s) passed in A and fail or error in B")
        if self.pass_rate_drop > self.max_drop + 1e-12:
            found.append(
                f"pass rate dropped {self.pass_rate_drop:.1%} "
                f"({self.pass_rate_a:.1%} -> {self.pass_rate_b:.1%}), "
                f"more than --max-drop {self.max_drop:.1%}"
            )
        return found

    @property
    def is_regression(self) -> bool:
        return bool(self.reasons)

    @property
    def tokens_delta(self) -> int | None:
        a, b = self.a.get("total_tokens"), self.b.get("total_tokens")
        return None if a is None or b is None else int(b) - int(a)

    @property
    def cost_delta(self) -> float | None:
        a, b = self.a.get("cost_usd"), self.b.get("cost_usd")
        return None if a is None or b is None else float(b) - float(a)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_a": self.a,
            "run_b": self.b,
            "configuration_a": self.configuration_a,
            "configuration_b": self.configuration_b,
            "warnings": self.warnings,
            "common_cases": self.common_cases,
            "only_in_a": self.only_in_a,
            "only_in_b": self.only_in_b,
            "pass_rate_a": self.pass_rate_a,
            "pass_rate_b": self.pass_rate_b,
            "pass_rate_drop": self.pass_rate_drop,
            "common_pass_rate_a": self.common_pass_rate_a,
            "common_pass_rate_b": self.common_pass_rate_b,
            "max_drop": self.max_drop,
            "tokens_delta": self.tokens_delta,
            "tokens_common_a": self.tokens_common_a,
            "tokens_common_b": self.tokens_common_b,
            "cost_delta": self.cost_delta,
            "flips": [asdict(f) | {"regression": f.regression} for f in self.flips],
            "metrics": [asdict(m) | {"delta": m.delta, "worse": m.worse} for m in self.metrics],
            "regression": self.is_regression,
            "reasons": self.reasons,
            "strict": self.strict,
            "verdict": self.paired.verdict.value if self.paired else None,
            "paired": self.paired.pass_fraction.model_dump() if self.paired else None,
            "metric_tests": {k: v.model_dump() for k, v in self.paired.metrics.items()}
            if self.paired
            else {},
            "flaky": self.flaky,
            "regressed_cases": [flip.case_id for flip in self.regressions],
        }


def compare_runs(
    con: duckdb.DuckDBPyConnection,
    run_a: str,
    run_b: str,
    *,
    max_drop: float = 0.0,
    strict: bool = False,
    alpha: float = ALPHA,
    include_failed: bool = False,
    adjustment: Adjustment = Adjustment.BH,
) -> Comparison:
    """Per-case flips, metric deltas, pass-rate, token and cost deltas of B against A, and
    the paired comparison that decides a regression (unless ``strict``). An infrastructure
    failure on either side is refused unless ``include_failed``, and so are runs of two agents
    (docs/cli.md)."""
    if not include_failed:
        refuse_failed(con, run_a, run_b)
    a, b = _run_pair(con, run_a, run_b)
    _refuse_other_agents(a, b)
    cases = _case_pairs(con, run_a, run_b)
    common = [c for c in cases if c[2] is not None and c[3] is not None]
    only_a = [c[0] for c in cases if c[3] is None]
    only_b = [c[0] for c in cases if c[2] is None]
    tokens_a = [c[4] for c in common if c[4] is not None]
    tokens_b = [c[5] for c in common if c[5] is not None]
    return Comparison(
        a=a,
        b=b,
        max_drop=max_drop,
        common_cases=len(common),
        only_in_a=only_a,
        only_in_b=only_b,
        passed_a=sum(1 for c in common if c[2] == "PASS"),
        passed_b=sum(1 for c in common if c[3] == "PASS"),
        flips=[
            CaseFlip(case_id=c[0], test_name=c[1], status_a=c[2], status_b=c[3])
            for c in common
            if c[2] != c[3]
        ],
        metrics=_metric_deltas(con, run_a, run_b),
        tokens_common_a=sum(tokens_a) if tokens_a else None,
        tokens_common_b=sum(tokens_b) if tokens_b else None,
        warnings=_pair_warnings(a, b, len(common), len(only_a), len(only_b)),
        paired=compare_paired(con, run_a, run_b, alpha=alpha, adjustment=adjustment),
        strict=strict,
    )


def _run_pair(
    con: duckdb.DuckDBPyConnection, run_a: str, run_b: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``eval_runs`` rows of A and B."""
    sides = {
        row["run_id"]: row
        for row in _dicts(
            con.execute(
                f"SELECT {', '.join(RUN_COLUMNS)} FROM {RUNS_WITH_COSTS} WHERE run_id IN (?, ?)",
                [run_a, run_b],
            )
        )
    }
    return sides[run_a], sides[run_b]


def _refuse_other_agents(a: dict[str, Any], b: dict[str, Any]) -> None:
    """Two agents answer different test suites with different tools: their runs are never
    paired (a ConfigError saying what to compare instead)."""
    if a["agent_slug"] == b["agent_slug"]:
        return
    raise ConfigError(
        f"run {str(a['run_id'])[:12]} ({configuration(a)}) and run {str(b['run_id'])[:12]} "
        f"({configuration(b)}) are runs of different agents ({a['agent_slug']} vs "
        f"{b['agent_slug']}), which are never compared: compare two runs of one agent "
        "(its prompt versions and model candidates; `holodeck history runs --agent NAME` "
        "lists them), or read each agent's cells side by side in the configuration_cells "
        "view (docs/history.md)"
    )


def _case_pairs(con: duckdb.DuckDBPyConnection, run_a: str, run_b: str) -> list[tuple[Any, ...]]:
    """Every case of either run: (case_id, test_name, status A, status B, tokens A, tokens B),
    a side's status None where the case is not in that run."""
    return con.execute(
        """
        SELECT coalesce(ta.case_id, tb.case_id) AS case_id,
               coalesce(tb.test_name, ta.test_name) AS test_name,
               ta.status, tb.status, ta.total_tokens, tb.total_tokens
        FROM (SELECT * FROM test_results WHERE run_id = ?) ta
        FULL OUTER JOIN (SELECT * FROM test_results WHERE run_id = ?) tb USING (case_id)
        ORDER BY case_id
        """,
        [run_a, run_b],
    ).fetchall()


def _pair_warnings(
    a: dict[str, Any], b: dict[str, Any], common: int, only_a: int, only_b: int
) -> list[str]:
    """What makes the two runs less comparable: other test sets."""
    warnings = []
    if a["dataset_hash"] != b["dataset_hash"] or only_a or only_b:
        warnings.append(
            "the runs have different test sets (dataset hash "
            f"{str(a['dataset_hash'])[:12]} vs {str(b['dataset_hash'])[:12]}): comparing the "
            f"{common} common case(s); {only_a} only in A, {only_b} only in B"
        )
    return warnings


def _metric_deltas(con: duckdb.DuckDBPyConnection, run_a: str, run_b: str) -> list[MetricDelta]:
    """Each metric's count, mean and pass rate in A and B over the cases both runs have."""
    rows = con.execute(
        """
        WITH common AS (
            SELECT case_id FROM test_results WHERE run_id = $a
            INTERSECT
            SELECT case_id FROM test_results WHERE run_id = $b
        )
        SELECT metric_name, any_value(unit), any_value(direction),
               count(coalesce(score, raw_score)) FILTER (WHERE run_id = $a),
               count(coalesce(score, raw_score)) FILTER (WHERE run_id = $b),
               avg(coalesce(score, raw_score)) FILTER (WHERE run_id = $a),
               avg(coalesce(score, raw_score)) FILTER (WHERE run_id = $b),
               avg(CAST(passed AS DOUBLE)) FILTER (WHERE run_id = $a),
               avg(CAST(passed AS DOUBLE)) FILTER (WHERE run_id = $b)
        FROM metric_results
        WHERE run_id IN ($a, $b) AND case_id IN (SELECT case_id FROM common)
        GROUP BY metric_name
        ORDER BY metric_name
        """,
        {"a": run_a, "b": run_b},
    ).fetchall()
    return [
        MetricDelta(
            metric_name=r[0],
            unit=r[1],
            direction=r[2],
            n_a=int(r[3]),
            n_b=int(r[4]),
            mean_a=r[5],
            mean_b=r[6],
            pass_rate_a=r[7],
            pass_rate_b=r[8],
        )
        for r in rows
    ]
