"""HoloDeck 0.7.1 blocks we validate as HoloDeck does but do not use: ``evaluations.optimizer``
(``holodeck test optimize``, ``optimizer/config.py``) and ``observability``
(``models/observability.py``). Unknown keys are refused at every level, as there, so a file
HoloDeck refuses is refused here too (docs/holodeck-fidelity.md)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from holodeck_core.models.base import StrictModel


class AsWritten(StrictModel):
    """Dumped as the config wrote it (the keys set only): a block we do not use keeps its
    shape in exports, fingerprints and the config hash, defaults never added."""

    @model_serializer(mode="wrap")
    def _as_written(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        return {key: value for key, value in dumped.items() if key in self.model_fields_set}


class NumericAxis(AsWritten):
    path: str = Field(min_length=1)
    type: Literal["float", "int", "categorical"]
    range: list[Any]

    @model_validator(mode="after")
    def _range_fits(self) -> NumericAxis:
        if self.type in ("float", "int"):
            if len(self.range) != 2 or not self.range[0] < self.range[1]:
                raise ValueError(f"axis {self.path!r}: range is [low, high] with low < high")
        elif not self.range:
            raise ValueError(f"categorical axis {self.path!r} needs at least one choice")
        return self


class TextualAxis(AsWritten):
    path: str = Field(min_length=1)
    max_chars: int = Field(8000, gt=0)


class Axes(AsWritten):
    numeric: list[NumericAxis] = Field(default_factory=list)
    textual: list[TextualAxis] = Field(default_factory=list)


class Phase(AsWritten):
    max_trials: int = Field(gt=0)
    patience: int = Field(gt=0)


class OptimizerConfig(AsWritten):
    """``evaluations.optimizer``: parsed and checked, not used."""

    loss: dict[str, float]
    axes: Axes = Field(default_factory=Axes)
    max_cycles: int = Field(3, gt=0)
    numeric_phase: Phase | None = None
    textual_phase: Phase | None = None
    min_delta: float = Field(0.01, ge=0.0)
    seed: int = 42

    @field_validator("loss")
    @classmethod
    def _positive_weights(cls, value: dict[str, float]) -> dict[str, float]:
        if not value:
            raise ValueError("loss needs at least one metric weight")
        if any(weight <= 0 for weight in value.values()):
            raise ValueError("loss weights must be > 0 (HoloDeck refuses 0 and below)")
        return value


class Traces(AsWritten):
    enabled: bool = True
    sample_rate: float = Field(1.0, ge=0.0, le=1.0)
    capture_content: bool = False
    capture_evaluation_content: bool = False
    redaction_patterns: list[str] = Field(default_factory=list)
    max_queue_size: int = Field(2048, ge=1)
    max_export_batch_size: int = Field(512, ge=1)
    schedule_delay_millis: int = Field(2000, ge=100)


class MetricsExport(AsWritten):
    enabled: bool = True
    export_interval_ms: int | None = None


class Logs(AsWritten):
    enabled: bool = True
    level: str | None = None
    include_trace_context: bool | None = None
    filter_namespaces: list[str] | None = None


class ConsoleExporter(AsWritten):
    enabled: bool = True
    pretty_print: bool = True
    include_timestamps: bool = True


class OTLPExporter(AsWritten):
    enabled: bool = True
    endpoint: str | None = None
    protocol: Literal["grpc", "http"] | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_ms: int | None = None
    compression: str | None = None
    insecure: bool | None = None


class PrometheusExporter(AsWritten):
    enabled: bool = False
    port: int | None = None
    host: str | None = None
    path: str | None = None


class AzureMonitorExporter(AsWritten):
    enabled: bool = False
    connection_string: str | None = None
    disable_offline_storage: bool | None = None
    storage_directory: str | None = None


class Exporters(AsWritten):
    console: ConsoleExporter | None = None
    otlp: OTLPExporter | None = None
    prometheus: PrometheusExporter | None = None
    azure_monitor: AzureMonitorExporter | None = None


class ObservabilityConfig(AsWritten):
    """``observability``: parsed and checked, not used (we export no telemetry)."""

    enabled: bool = False
    disable_provider_tracing: bool | None = None
    service_name: str | None = None
    traces: Traces | None = None
    metrics: MetricsExport | None = None
    logs: Logs | None = None
    exporters: Exporters | None = None
    resource_attributes: dict[str, str] = Field(default_factory=dict)
