"""Experiment config files: read one (TOML), and write a resolved config whose paths still load.

The core validates parsed data (``easerve_core.config.ExperimentConfig.from_dict``);
this module reads the file and answers what validation asks of the files a
config names (:data:`DISK`, a :class:`~easerve_core.config.ConfigFiles`: is
the model spec a file, what does the trace hold). :func:`portable_dict` is
the resolved config with its file paths relative to the folder it is
written into, so the written file loads on any machine, from any checkout
(paths in a config are resolved against the config's folder).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from easerve_core.config import ExperimentConfig
from easerve_core.workload import Trace
from runtime.files import read_toml
from runtime.traces import load_trace


class Disk:
    """The local file system, as :class:`~easerve_core.config.ConfigFiles`."""

    def has_file(self, path: Path) -> bool:
        return path.is_file()

    def trace(self, path: str, trace_format: str, *, field: str) -> Trace:
        return load_trace(path, trace_format, field=field)


#: what every command validates its configs with
DISK = Disk()


def load_experiment(path: str | Path) -> ExperimentConfig:
    """Read and validate an experiment TOML file."""
    path = Path(path)
    data = read_toml(path, what="config")
    config = ExperimentConfig.from_dict(data, base_dir=path.parent, files=DISK)
    return replace(config, source=path.resolve())


def portable_path(path: Path | str, relative_to: Path | None) -> str:
    """``path`` relative to the folder ``relative_to`` (POSIX separators), or as it is without one."""
    if relative_to is None:
        return str(path)
    return Path(os.path.relpath(Path(path).resolve(), Path(relative_to).resolve())).as_posix()


def portable_dict(config: ExperimentConfig, relative_to: Path | None) -> dict[str, Any]:
    """:meth:`~easerve_core.config.ExperimentConfig.to_dict` with its file paths
    (``[model] spec``, ``[profile] path``, ``[workload] trace``) relative to the folder
    ``relative_to`` the data will be written into; as resolved (absolute) without one."""
    out = config.to_dict()
    if "spec" in out["model"]:
        out["model"]["spec"] = portable_path(out["model"]["spec"], relative_to)
    if "trace" in out["workload"]:
        out["workload"]["trace"] = portable_path(out["workload"]["trace"], relative_to)
    if config.profile_path is not None:
        out["profile"]["path"] = portable_path(config.profile_path, relative_to)
    return out
