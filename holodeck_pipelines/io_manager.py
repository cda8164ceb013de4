"""Stage outputs as readable JSON, one file per asset and cell (``<asset>/<model>/<prompt>.json``,
docs/dagster.md), no pickles. A stage's value is its cells' models by partition key (one key,
or several in a single-run backfill).

The base is a local folder (default ``HOLODECK_HOME/artifacts``) or any ``UPath`` URL
(``s3://bucket/prefix`` when the pipelines are scaled out). Object-store credentials are
resource fields bound to ``dg.EnvVar`` (``builder.py``): Dagster resolves them in the worker
and shows only the variable's name, never the value."""

import typing
import uuid
from typing import Any

import dagster as dg
from pydantic import BaseModel
from upath import UPath

from holodeck_core.engine import redact
from holodeck_core.engine.artifacts import artifact_base
from holodeck_pipelines.cells import cell_of


class PydanticJsonIOManager(dg.ConfigurableIOManager):
    base_url: str
    aws_access_key_id: str | None = None
    aws_secret_access_key: str | None = None
    endpoint_url: str | None = None

    def _path(self, context: dg.OutputContext | dg.InputContext, partition: str) -> UPath:
        base = artifact_base(
            self.base_url,
            key=self.aws_access_key_id,
            secret=self.aws_secret_access_key,
            endpoint_url=self.endpoint_url,
        )
        cell = cell_of(partition)
        path: UPath = base.joinpath(*context.asset_key.path, cell.model, f"{cell.prompt}.json")
        return path

    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        if not (isinstance(obj, dict) and all(isinstance(v, BaseModel) for v in obj.values())):
            raise TypeError(
                f"{context.asset_key.to_user_string()} returned {type(obj).__name__}; stage "
                "outputs must be pydantic models by partition key"
            )
        paths = []
        for partition, model in obj.items():
            path = self._path(context, partition)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")  # concurrent runs
            tmp.write_text(redact(model).model_dump_json(indent=2), encoding="utf-8")
            tmp.rename(path)
            paths.append(path)
        shown = paths[0] if len(paths) == 1 else paths[0].parent.parent  # the asset's folder
        context.add_output_metadata({"path": dg.MetadataValue.path(str(shown))})

    def load_input(self, context: dg.InputContext) -> Any:
        _, model = typing.get_args(context.dagster_type.typing_type) or (None, None)
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise TypeError(
                f"cannot load {context.dagster_type.typing_type!r}: inputs must be annotated "
                "dict[str, <a pydantic model>]"
            )
        return {
            partition: model.model_validate_json(
                self._path(context, partition).read_text(encoding="utf-8")
            )
            for partition in context.asset_partition_keys
        }
