"""Worker processes: one role per stage group, one entry point.

:func:`run_worker` is the process entry point (module level, so ``spawn`` and
``forkserver`` can pickle it). It ignores SIGINT (the front end owns Ctrl-C
and stops workers itself), sets ``HF_HUB_OFFLINE=1`` and the torch thread
count, loads the shared weights, warms up, reports ``ready`` and runs its
role until a ``None`` arrives in its inbox, the front end disappears, or it
fails (reported as a ``crash`` event). On the way out it waits for its
in-flight messages to be acked, so receivers never lose a tensor (P8).
"""

from __future__ import annotations

import os
import signal
import traceback

import torch
from transformers.utils import logging as hf_logging

from easerve_core.deployment import Architecture
from live.device import use_device
from live.events import Crash, Ready
from live.transport import Channels
from live.workers.aggregated import AggregatedWorker
from live.workers.common import WorkerContext, WorkerSpec
from live.workers.encode import EncodeWorker
from live.workers.llm import DecodeWorker, PrefillWorker
from live.zoo import load_model

#: architecture -> worker group -> role class
ROLES: dict[Architecture, dict[str, type]] = {
    Architecture.DISAGGREGATED: {"encode": EncodeWorker, "prefill": PrefillWorker, "decode": DecodeWorker},
    Architecture.AGGREGATED: {"decode": AggregatedWorker},  # each LM instance runs all three stages
}


def run_worker(spec: WorkerSpec, channels: Channels) -> None:
    """Process entry point: set up, warm up, run the role, always report and drain."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ["HF_HUB_OFFLINE"] = "1"
    torch.set_num_threads(spec.options.num_threads)
    hf_logging.disable_progress_bar()
    use_device(spec.options.device)
    ctx = None
    try:
        model = load_model(spec.model, spec.weights_dir, device=spec.options.device)
        ctx = WorkerContext(spec, channels, model)
        role = _role(spec.deployment.architecture, spec.me[0])(ctx)
        role.warm_up()
        ctx.emit(Ready(worker=spec.me))
        role.run()
    except BaseException as exc:  # reported, then the process exits non-zero
        channels.emit(Crash(worker=spec.me, error=f"{exc!r}", trace=traceback.format_exc(limit=5)))
        raise SystemExit(1) from None
    finally:
        if ctx is not None:
            ctx.outbox.drain(spec.options.shutdown_timeout_s)


def _role(architecture: Architecture, group: str) -> type:
    roles = ROLES[architecture]
    if group not in roles:
        raise ValueError(f"no {group!r} workers in a {architecture} deployment; "
                         f"known: {', '.join(sorted(roles))}")
    return roles[group]


__all__ = ["ROLES", "WorkerSpec", "run_worker"]
