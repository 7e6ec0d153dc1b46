"""Search spaces: a YAML file of dotted config keys and how Optuna samples each one.

File format (see ``sweeps/ppo.yaml``)::

    params:                       # the swept settings: dotted keys of config.yaml
      ppo.learning_rate: {type: log-float, low: 1.0e-5, high: 1.0e-3}
      ppo.clip_coef:     {type: float, low: 0.1, high: 0.3}            # optional: step, log
      ppo.update_epochs: {type: int, low: 3, high: 15}                 # optional: step, log
      env.n_envs:        {type: categorical, choices: [32, 64, 128]}
      policy.hidden:     {type: categorical, choices: ["64,64", "128,128"]}
    fixed:                        # optional: settings applied to every trial (like --set)
      train.patience: 10

Any key that exists in the config can be swept or fixed.  A list-valued setting (such as
``policy.hidden``) takes choices written as ``"128,128"`` or ``[128, 128]``; Optuna records them
as the string ``"128,128"`` (its categorical values must be scalars) and the trial's config gets
the list ``[128, 128]`` back.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

TYPES = ("float", "log-float", "int", "categorical")
_FIELDS = {
    "float": {"type", "low", "high", "log", "step"},
    "log-float": {"type", "low", "high"},
    "int": {"type", "low", "high", "log", "step"},
    "categorical": {"type", "choices"},
}
_MISSING = object()  # config_get: no default given
_ABSENT = object()   # config_get's answer for a missing key


class SpaceError(ValueError):
    """A search-space file that cannot be used; the message names the file and the key."""


# -- dotted config keys ------------------------------------------------------------------------------
def config_get(cfg: dict, key: str, default: Any = _MISSING) -> Any:
    """The value of a dotted key (``"ppo.gamma"``); ``KeyError`` naming the key when it is absent."""
    node: Any = cfg
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            if default is not _MISSING:
                return default
            raise KeyError(f"unknown config key {key!r}")
        node = node[part]
    return node


def config_set(cfg: dict, key: str, value: Any) -> None:
    """Set an existing dotted key in place (``KeyError`` when it is not a setting of ``cfg``)."""
    *sections, last = key.split(".")
    node: Any = cfg
    for part in sections:
        if not isinstance(node, dict) or not isinstance(node.get(part), dict):
            raise KeyError(f"unknown config key {key!r}")
        node = node[part]
    if last not in node:
        raise KeyError(f"unknown config key {key!r}")
    node[last] = value


def encode_list(value: Any) -> str:
    """``[128, 128]`` or ``" 128, 128 "`` -> ``"128,128"`` (Optuna's categorical value for a list)."""
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return ",".join(p.strip() for p in str(value).split(","))


def decode_list(text: str) -> list:
    """``"128,128"`` -> ``[128, 128]``; items become int, else float, else stay strings."""
    out: list = []
    for item in (p.strip() for p in str(text).split(",")):
        if not item:
            raise ValueError(f"empty item in list value {text!r}")
        for kind in (int, float):
            try:
                out.append(kind(item))
                break
            except ValueError:
                continue
        else:
            out.append(item)
    return out


def apply_params(cfg: dict, params: dict[str, Any]) -> dict:
    """A copy of ``cfg`` with dotted-key ``params`` set; list settings decode ``"a,b"`` strings."""
    cfg = copy.deepcopy(cfg)
    for key, value in params.items():
        if isinstance(config_get(cfg, key), list) and isinstance(value, str):
            value = decode_list(value)
        config_set(cfg, key, value)
    return cfg


# -- one parameter ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Param:
    """One swept setting: ``kind`` is ``float``, ``int`` or ``categorical``."""

    key: str
    kind: str
    low: float | int | None = None
    high: float | int | None = None
    log: bool = False
    step: float | int | None = None
    choices: tuple = ()

    def suggest(self, trial) -> Any:
        """Ask an Optuna trial for this parameter's value (named by the dotted key)."""
        if self.kind == "float":
            return trial.suggest_float(self.key, self.low, self.high, log=self.log, step=self.step)
        if self.kind == "int":
            return trial.suggest_int(self.key, self.low, self.high, log=self.log, step=self.step or 1)
        return trial.suggest_categorical(self.key, list(self.choices))

    def describe(self) -> str:
        if self.kind == "categorical":
            return f"{self.key}: one of {list(self.choices)}"
        scale = "log " if self.log else ""
        step = f" step {self.step}" if self.step else ""
        return f"{self.key}: {scale}{self.kind} in [{self.low}, {self.high}]{step}"


@dataclass
class SearchSpace:
    """The swept parameters and the fixed settings of a space file."""

    params: list[Param]
    fixed: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    @classmethod
    def load(cls, path: str | Path, cfg: dict, config_name: str = "the config") -> "SearchSpace":
        """Read and validate a space file against ``cfg`` (the base config every trial starts from).

        Raises:
            SpaceError: naming the file and the key: unknown config key, unknown or missing field,
                bad type, ``low >= high``, log scale with ``low <= 0``, empty or duplicate choices.
        """
        path = Path(path)
        if not path.is_file():
            raise SpaceError(f"{path}: search-space file not found")
        try:
            doc = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            raise SpaceError(f"{path}: not valid YAML ({exc})") from None
        return cls.from_dict(doc, cfg, source=str(path), config_name=config_name, path=path)

    @classmethod
    def from_dict(cls, doc: Any, cfg: dict, *, source: str = "search space", config_name: str = "the config",
                  path: Path | None = None) -> "SearchSpace":
        if not isinstance(doc, dict):
            raise SpaceError(f"{source}: expected a mapping with 'params' (and optionally 'fixed') at the top level")
        unknown = set(doc) - {"params", "fixed"}
        if unknown:
            raise SpaceError(f"{source}: unknown top-level section(s) {sorted(unknown)}; expected 'params' and "
                             f"optionally 'fixed'")
        raw_params, fixed = doc.get("params"), doc.get("fixed") or {}
        if not isinstance(raw_params, dict) or not raw_params:
            raise SpaceError(f"{source}: 'params' must be a non-empty mapping of dotted config keys to "
                             f"{{type: ..., ...}}")
        if not isinstance(fixed, dict):
            raise SpaceError(f"{source}: 'fixed' must be a mapping of dotted config keys to values")
        for key in fixed:
            _check_key(source, "fixed", key, cfg, config_name)
            if key in raw_params:
                raise SpaceError(f"{source}: {key}: listed under both 'params' and 'fixed'")
        params = [_parse_param(source, key, spec, cfg, config_name) for key, spec in raw_params.items()]
        return cls(params, dict(fixed), path)

    @property
    def keys(self) -> list[str]:
        return [p.key for p in self.params]

    def suggest(self, trial) -> dict[str, Any]:
        """Sample every parameter for ``trial``: ``{dotted key: value as Optuna records it}``."""
        return {p.key: p.suggest(trial) for p in self.params}

    def to_dict(self) -> dict:
        """The space as plain data (stored on the study, so workers can check they agree)."""
        out = {}
        for p in self.params:
            if p.kind == "categorical":
                out[p.key] = {"type": "categorical", "choices": list(p.choices)}
            else:
                out[p.key] = {"type": p.kind, "low": p.low, "high": p.high, "log": p.log, "step": p.step}
        return {"params": out, "fixed": self.fixed}


# -- validation ---------------------------------------------------------------------------------------
def _check_key(source: str, where: str, key: Any, cfg: dict, config_name: str) -> Any:
    if not isinstance(key, str) or not key:
        raise SpaceError(f"{source}: {where}: keys must be dotted config keys such as 'ppo.gamma', got {key!r}")
    value = config_get(cfg, key, _ABSENT)
    if value is _ABSENT:
        raise SpaceError(f"{source}: {key}: unknown config key ({config_name} has no setting {key!r})")
    if isinstance(value, dict):
        raise SpaceError(f"{source}: {key}: is a section of {config_name}, not a setting; name one of its "
                         f"keys ({', '.join(f'{key}.{k}' for k in value)})")
    return value


def _number(source: str, key: str, name: str, value: Any, integer: bool) -> float | int:
    """YAML reads ``1e-5`` as a string: accept numeric strings, reject booleans and the rest."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SpaceError(f"{source}: {key}: '{name}' must be a finite number, got {value!r}")
    if integer:
        if float(value) != int(value):
            raise SpaceError(f"{source}: {key}: '{name}' must be an integer for type int, got {value!r}")
        return int(value)
    return float(value)


def _parse_param(source: str, key: Any, spec: Any, cfg: dict, config_name: str) -> Param:
    current = _check_key(source, "params", key, cfg, config_name)
    if not isinstance(spec, dict) or "type" not in spec:
        raise SpaceError(f"{source}: {key}: expected a mapping with 'type' (one of {', '.join(TYPES)}), got {spec!r}")
    kind = spec["type"]
    if kind not in TYPES:
        raise SpaceError(f"{source}: {key}: unknown type {kind!r}; expected one of {', '.join(TYPES)}")
    extra = set(spec) - _FIELDS[kind]
    if extra:
        raise SpaceError(f"{source}: {key}: unknown field(s) {sorted(extra)} for type {kind}; allowed: "
                         f"{', '.join(sorted(_FIELDS[kind]))}")
    if kind == "categorical":
        return _parse_categorical(source, key, spec, current, config_name)

    if isinstance(current, (bool, str, list)) or (current is not None and not isinstance(current, (int, float))):
        raise SpaceError(f"{source}: {key}: type {kind} needs a numeric setting, but {config_name} has "
                         f"{current!r}; use type categorical")
    integer = kind == "int"
    if not integer and isinstance(current, int):
        raise SpaceError(f"{source}: {key}: {config_name} has the integer {current!r}; use type int "
                         f"(or categorical), not {kind}")
    for name in ("low", "high"):
        if name not in spec:
            raise SpaceError(f"{source}: {key}: type {kind} needs '{name}'")
    low = _number(source, key, "low", spec["low"], integer)
    high = _number(source, key, "high", spec["high"], integer)
    if low >= high:
        raise SpaceError(f"{source}: {key}: low ({low}) must be less than high ({high})")
    log = kind == "log-float" or spec.get("log", False)
    if not isinstance(log, bool):
        raise SpaceError(f"{source}: {key}: 'log' must be true or false, got {log!r}")
    if log and low <= 0:
        raise SpaceError(f"{source}: {key}: a log scale needs low > 0, got low {low}")
    step = spec.get("step")
    if step is not None:
        step = _number(source, key, "step", step, integer)
        if step <= 0:
            raise SpaceError(f"{source}: {key}: 'step' must be positive, got {step}")
        if log and (not integer or step != 1):
            raise SpaceError(f"{source}: {key}: 'step' cannot be combined with a log scale")
    return Param(key, "int" if integer else "float", low, high, bool(log), step)


def _parse_categorical(source: str, key: str, spec: dict, current: Any, config_name: str) -> Param:
    choices = spec.get("choices")
    if not isinstance(choices, list) or not choices:
        raise SpaceError(f"{source}: {key}: type categorical needs a non-empty list 'choices', got {choices!r}")
    out = []
    for c in choices:
        if isinstance(current, list):  # a list setting: "128,128" or [128, 128]
            if not isinstance(c, (str, list)):
                raise SpaceError(f"{source}: {key}: {config_name} has the list {current!r}, so each choice must "
                                 f"be a list or a comma-separated string such as \"128,128\"; got {c!r}")
            try:
                decode_list(encode_list(c))
            except ValueError as exc:
                raise SpaceError(f"{source}: {key}: choice {c!r}: {exc}") from None
            out.append(encode_list(c))
        else:
            if not (c is None or isinstance(c, (bool, int, float, str))):
                raise SpaceError(f"{source}: {key}: choices must be numbers, strings, booleans or null "
                                 f"({config_name} has {current!r}, not a list); got {c!r}")
            out.append(c)
    if len(set(map(repr, out))) != len(out):
        raise SpaceError(f"{source}: {key}: duplicate choices in {choices!r}")
    return Param(key, "categorical", choices=tuple(out))
