"""An agent's grid (docs/dagster.md): its assets are partitioned by prompt version x model
candidate, for every agent (one candidate, ``default``, when ``holodeck.yaml`` declares none),
so adding a candidate never changes an asset's partitioning. A partition is a *cell*: one
configuration. Dagster writes a cell's key as ``model|prompt`` (its dimensions sorted by
name); :func:`cell_of` reads one back."""

from dataclasses import dataclass

import dagster as dg

from holodeck_core.config.loader import LoadedAgent
from holodeck_core.naming import partitions_def_name

PROMPT = "prompt"
MODEL = "model"


@dataclass(frozen=True)
class Cell:
    """One configuration of an agent: a prompt version and a model candidate."""

    prompt: str
    model: str

    @property
    def key(self) -> dg.MultiPartitionKey:
        return dg.MultiPartitionKey({PROMPT: self.prompt, MODEL: self.model})

    @property
    def label(self) -> str:
        """How logs, checks and failures name the cell."""
        return f"prompt version {self.prompt} x model {self.model}"


def grid(
    loaded: LoadedAgent,
) -> tuple[dg.DynamicPartitionsDefinition, dg.MultiPartitionsDefinition]:
    """The agent's prompt versions (rows, added by the sensor) and its grid of cells."""
    prompts = dg.DynamicPartitionsDefinition(name=partitions_def_name(loaded.agent.name))
    models = dg.StaticPartitionsDefinition(loaded.candidates.names)
    return prompts, dg.MultiPartitionsDefinition({PROMPT: prompts, MODEL: models})


def cell_of(key: str) -> Cell:
    """The cell of a partition key (a ``dg.MultiPartitionKey`` or its ``model|prompt`` string:
    neither part holds a ``|``, a prompt key and a candidate name being partition keys)."""
    if isinstance(key, dg.MultiPartitionKey):
        parts = key.keys_by_dimension
        return Cell(prompt=parts[PROMPT], model=parts[MODEL])
    model, _, prompt = key.partition("|")
    return Cell(prompt=prompt, model=model)


def labels(keys: list[str]) -> str:
    """Cells for a headline, by model: ``prompt version v1, v2 x model large; prompt version v1
    x model small``."""
    by_model: dict[str, list[str]] = {}
    for cell in (cell_of(key) for key in keys):
        by_model.setdefault(cell.model, []).append(cell.prompt)
    return "; ".join(Cell(", ".join(p), model).label for model, p in by_model.items())


def prompts_of(keys: list[str]) -> list[str]:
    """The prompt versions of the cells, each once, in order."""
    return list(dict.fromkeys(cell_of(key).prompt for key in keys))


def rows_of(prompts: list[str], models: list[str]) -> list[dg.MultiPartitionKey]:
    """Every cell of the given prompt versions x candidates, row by row."""
    return [Cell(prompt, model).key for prompt in prompts for model in models]
