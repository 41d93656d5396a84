"""Experiment configs: one TOML file describes a run for either engine.

```toml
seed = 0
[model]
name = "llava-v1.6-34b"      # a model spec (sim) or zoo family (live)
# spec = "my-model.json"     # or a spec file (easerve model import), instead of name
size = "full"                # live only: tiny | small | full
[cluster]
gpu = "rtx6000ada"
num_gpus = 8                 # link_* keys override the GPU spec's defaults
num_nodes = 1                # multi-node: nic_bytes_per_s, nic_latency_s (docs/multinode.md)
[profile]
path = "profile.json"        # optional; default: the analytic profile
sm_share_table = { "1" = 0.5, "4" = 1.0 }   # optional; wins over the profile's own table
[deployment]
preset = "easerve"           # optional named preset the engine resolves
encode = { num_workers = 2, tp = 1 }
prefill = { num_workers = 1, tp = 2 }
decode = { num_workers = 2, tp = 2 }
max_encode_batch = 8
remote_fraction = 0.5
[workload]
mix = "llava-image"
arrival = "poisson"
rate_hz = 2.0
num_requests = 500
[slo]
tier = "moderate"            # strict | tight | moderate | loose | relaxed (or s1..s5)
# ttft_s = 20.0              # optional absolute per-request limits (seconds), each
# tpot_s = 0.1               #   replacing its tier limit (vLLM bench's --goodput)
# attainment = 0.9           # optional: a run sustains the SLO when >= 90% meet it
[sim]                        # engine-specific tables pass through as dicts
[live]
```

Paths (profile, trace) are resolved relative to the config file. Unknown
tables or keys fail with the field named; a key that moved between releases
(:data:`MOVED`) fails naming its old place and its new one. Without a
``[deployment]`` table the deployment is :class:`Deployment`'s defaults
(``deployment_given`` is then False, so a command can say so); :meth:`ExperimentConfig.to_dict`
gives the resolved config every run writes beside its results.

Pure: :meth:`ExperimentConfig.from_dict` takes the parsed table. The runtime
reads the TOML file (``runtime.configs.load_experiment``), and answers, as a
:class:`ConfigFiles` handed in, the two questions validation asks of files the
config names: is the model spec a file, and what does the trace hold. Handing
the reader in (rather than reading the files first) keeps the order of the
checks, so a config with several faults names the same first one.
``runtime.configs.portable_dict`` rewrites the paths relative to the folder a
resolved config is written into.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, Protocol

from easerve_core import checks
from easerve_core.cluster import Cluster
from easerve_core.deployment import Deployment
from easerve_core.settings import refuse_unknown
from easerve_core.slo import SLOSpec
from easerve_core.sm_share import SMShareTable
from easerve_core.workload import Trace, WorkloadSpec

_TOP = {"seed", "model", "cluster", "profile", "deployment", "workload", "slo", "sim", "live"}
_CLUSTER_KEYS = {"gpu", "num_gpus", "link_bytes_per_s", "link_latency_s", "num_links", "num_nodes",
                 "nic_bytes_per_s", "nic_latency_s", "link_sharing"}
_PROFILE_KEYS = {"path", "sm_share_table"}
#: keys that moved between releases: (old table, or "" for the top level, key) -> where they live now
MOVED = {
    ("live", "sm_share_table"): "[profile] sm_share_table",
    ("sim", "sm_share_table"): "[profile] sm_share_table",
    ("deployment", "sm_share_table"): "[profile] sm_share_table",
    ("", "sm_share_table"): "[profile] sm_share_table",
}


class ConfigFiles(Protocol):
    """What validating a config asks of the files it names (``runtime.configs.DISK`` answers)."""

    def has_file(self, path: Path) -> bool:
        """Whether ``path`` is a file (``[model] spec``)."""
        ...

    def trace(self, path: str, trace_format: str, *, field: str) -> Trace:
        """The trace file ``path`` read as ``trace_format`` (``[workload] trace``)."""
        ...


def model_label(model: str) -> str:
    """A model as a title shows it: a spec file (``[model] spec``, named by its resolved path) by
    its file's stem, a built-in spec or zoo family by its name."""
    return PurePath(model).stem if model.endswith(".json") else model


def _refuse_moved(data: Mapping[str, Any]) -> None:
    """A key at its old place: one error naming the old place and the new (no misleading later error)."""
    for (table, key), now in MOVED.items():
        node = data if not table else data.get(table)
        if isinstance(node, Mapping) and key in node:
            was = f"[{table}] {key}" if table else f"top-level {key}"
            raise ValueError(f"{was} has moved to {now}; move it there")


def _table(data: Mapping[str, Any], name: str) -> dict[str, Any]:
    value = data.get(name, {})
    if not isinstance(value, Mapping):
        raise ValueError(f"[{name}] must be a table")
    return dict(value)


def _text(table: dict[str, Any], key: str, name: str) -> str | None:
    """``table[key]`` when given, a string (a name or a path); anything else is refused naming it."""
    value = table.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{name}.{key} must be a string, got {value!r}")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class ExperimentConfig:
    """A parsed, validated experiment (see the module docstring)."""

    model: str
    model_size: str
    #: the ``[cluster]`` keys as given: they override the hardware's defaults, which only the
    #: caller knows (the GPU spec's links), so the cluster is built late (:meth:`build_cluster`)
    cluster: Mapping[str, Any]
    deployment: Deployment
    deployment_preset: str | None
    workload: WorkloadSpec
    workload_table: Mapping[str, Any]
    slo: SLOSpec = field(default_factory=SLOSpec)
    seed: int = 0
    profile_path: Path | None = None
    sm_share_table: SMShareTable | None = None
    engine: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    source: Path | None = None
    #: whether the file had a [deployment] table (else the deployment is the defaults)
    deployment_given: bool = True

    @property
    def gpu(self) -> str:
        """``[cluster] gpu`` (required, so always there)."""
        return str(self.cluster["gpu"])

    @property
    def slo_tier(self) -> str:
        """``[slo] tier`` (the name as given)."""
        return self.slo.tier

    def build_cluster(self, base: Cluster | None = None) -> Cluster:
        """The cluster: ``base`` (e.g. GPU-spec defaults) overridden by the file's keys."""
        values: dict[str, Any] = {}
        if base is not None:
            values = {k: getattr(base, k) for k in _CLUSTER_KEYS}
        values.update(self.cluster)
        return Cluster(**values)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, base_dir: Path | None = None,
                  files: ConfigFiles | None = None) -> ExperimentConfig:
        """The parsed config ``data``; paths resolve against ``base_dir``, and ``files``
        answers what the files they name hold (needed only for ``[model] spec`` and
        ``[workload] trace``)."""
        _refuse_moved(data)
        unknown = sorted(set(data) - _TOP)
        if unknown:
            raise ValueError(f"unknown config table(s): {', '.join(unknown)}")
        base = base_dir or Path.cwd()
        model = _table(data, "model")
        refuse_unknown(model, ("name", "size", "spec"), "model", list_known=False)
        for key in ("name", "size", "spec"):
            _text(model, key, "model")
        if ("name" in model) == ("spec" in model):
            raise ValueError("model.name or model.spec is required (one of them)")
        if "spec" in model:  # a spec file: the model is named by its resolved path
            spec = (base / str(model["spec"])).resolve()
            if spec.suffix == ".json" and files is None:
                raise ValueError("model.spec: no files given to check it (pass runtime.configs.DISK)")
            if spec.suffix != ".json" or files is None or not files.has_file(spec):
                raise ValueError(f"model.spec {model['spec']}: no such spec file (*.json)")
            model["name"] = str(spec)
        cluster = _table(data, "cluster")
        refuse_unknown(cluster, _CLUSTER_KEYS, "cluster", list_known=False)
        if "gpu" not in cluster:
            raise ValueError("cluster.gpu is required")
        try:
            Cluster(**cluster)  # each key's type and range, named, before anything builds on it
        except ValueError as exc:
            raise ValueError(f"cluster.{exc}") from None
        dep = _table(data, "deployment")
        preset = _text(dep, "preset", "deployment")
        dep.pop("preset", None)
        deployment = Deployment.from_dict(dep)
        workload_table = _table(data, "workload")
        if _text(workload_table, "trace", "workload") is not None:
            workload_table["trace"] = str((base / workload_table["trace"]).resolve())
        workload = WorkloadSpec.from_dict(workload_table, traces=None if files is None else files.trace)
        slo = SLOSpec.from_dict(_table(data, "slo"))
        profile = _table(data, "profile")
        refuse_unknown(profile, _PROFILE_KEYS, "profile", list_known=False)
        path = _text(profile, "path", "profile")
        profile_path = None if path is None else (base / path).resolve()
        table = _share_table(profile["sm_share_table"]) if "sm_share_table" in profile else None
        return cls(
            model=str(model["name"]),
            model_size=str(model.get("size", "full")),
            cluster=cluster,
            deployment=deployment,
            deployment_preset=None if preset is None else str(preset),
            workload=workload,
            workload_table=workload_table,
            slo=slo,
            seed=checks.integer("seed", data.get("seed", 0), minimum=0),
            profile_path=profile_path,
            sm_share_table=table,
            engine={k: _table(data, k) for k in ("sim", "live") if k in data},
            deployment_given="deployment" in data,
        )

    def to_dict(self) -> dict[str, Any]:
        """The resolved config, as plain data (written beside every run), its file paths
        (``[model] spec``, ``[profile] path``, ``[workload] trace``) absolute, as resolved;
        ``runtime.configs.portable_dict`` makes them relative to where it is written."""
        dep = self.deployment.to_dict()
        if self.deployment_preset is not None:
            dep["preset"] = self.deployment_preset
        out: dict[str, Any] = {
            "seed": self.seed,
            "model": {"spec" if self.model.endswith(".json") else "name": self.model,
                      "size": self.model_size},
            "cluster": dict(self.cluster),
            "deployment": dep,
            "workload": _with_trace_str(self.workload_table),
            "slo": self.slo.to_dict(),
        }
        profile: dict[str, Any] = {}
        if self.profile_path is not None:
            profile["path"] = str(self.profile_path)
        if self.sm_share_table is not None:
            profile["sm_share_table"] = self.sm_share_table.to_dict()["shares"]
        if profile:
            out["profile"] = profile
        out.update({k: dict(v) for k, v in self.engine.items()})
        return out


def _with_trace_str(table: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(table)
    if "trace" in out:
        out["trace"] = str(out["trace"])
    return out


def _share_table(raw: Any) -> SMShareTable:
    """``[profile] sm_share_table``: encode share per batch size, ``{"1" = 0.5, ...}``."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"profile.sm_share_table must be a table of batch size -> share, got {raw!r}")
    try:
        return SMShareTable.from_dict({"shares": dict(raw)})
    except ValueError as exc:
        raise ValueError(f"profile.sm_share_table: {exc}") from None
