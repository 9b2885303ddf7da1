"""Configuration: pydantic schemas, YAML files and `key=value` overrides.

Every field has a one-line description (shown by `--help`); an unknown field or a bad
value fails before any work, naming the field, the value and what is accepted."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

M = TypeVar("M", bound=BaseModel)


class Schema(BaseModel):
    """Base of every config: unknown keys are errors, values are validated on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)


class ConfigError(ValueError):
    """A config that cannot run; the message names the field, the value and the choices."""


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """["lr=1e-3", "tasks=[a,b]"] → {"lr": 0.001, "tasks": ["a", "b"]} (values read as YAML)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {pair!r} is not of the form key=value")
        try:
            out[key.strip()] = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError as err:
            raise ConfigError(f"override {pair!r}: cannot read the value: {err}") from None
    return out


def load(
    schema: type[M], file: str | Path | None = None, overrides: dict[str, Any] | None = None
) -> M:
    """`schema` from an optional YAML file, updated by `overrides`; errors are ConfigError."""
    data: dict[str, Any] = {}
    if file is not None:
        path = Path(file)
        if not path.is_file():
            raise ConfigError(f"config file {str(path)!r} does not exist")
        loaded = yaml.safe_load(path.read_text()) or {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {str(path)!r} must hold a mapping of field: value")
        data.update(loaded)
    data.update(overrides or {})
    try:
        return schema(**data)
    except ValidationError as err:
        raise ConfigError(_explain(schema, err)) from None


def _explain(schema: type[BaseModel], err: ValidationError) -> str:
    lines = [f"invalid {schema.__name__}:"]
    for e in err.errors():
        field = ".".join(str(p) for p in e["loc"]) or "(config)"
        if e["type"] == "extra_forbidden":
            valid = ", ".join(sorted(schema.model_fields))
            lines.append(f"  unknown field {field!r}; valid fields: {valid}")
        else:
            lines.append(f"  {field} = {e.get('input')!r}: {e['msg']}")
    return "\n".join(lines)


def describe_fields(schema: type[BaseModel]) -> str:
    """One line per field: name, default and description, for `--help`."""
    rows = []
    for name, field in schema.model_fields.items():
        default = field.get_default(call_default_factory=True)
        rows.append(f"  {name} (default {default!r}): {field.description or ''}")
    return "\n".join(rows)
