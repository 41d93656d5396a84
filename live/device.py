"""Where a live thread makes its tensors: the CPU, or the process's CUDA device.

The families build inputs, masks and positions with plain factory calls
(``torch.tensor``, ``torch.zeros``, ``torch.arange``); :func:`use_device`
makes ``device`` the default for those calls in the calling thread (torch's
default device is per thread, so each worker thread calls it), which is all
that moves the stages to a GPU. Tensors that arrive from elsewhere (a
client's pixels, a peer's embeddings) are moved by the stage that reads them.

On CUDA it also keeps scaled-dot-product attention off cuDNN: on the H200
image of 2026-11-30 (torch 2.11) cuDNN attention built a plan per new KV
length, 45-66 ms each time, and a decode step always meets a new length
(bench/gpu/RESULTS.md §3).
"""

from __future__ import annotations

from typing import Any

import torch


def use_device(device: str) -> None:
    """Make ``device`` the calling thread's default for new tensors (a no-op for ``cpu``)."""
    if device == "cpu":
        return
    if device != "cuda":
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if not torch.cuda.is_available():
        raise ValueError("device 'cuda': no CUDA device in this process")
    torch.set_default_device(device)
    torch.backends.cuda.enable_cudnn_sdp(False)


def model_device(model: Any) -> torch.device:
    """The device of ``model``'s first parameter."""
    return next(model.parameters()).device


def sync(device: torch.device | str) -> None:
    """Wait for the calling thread's queued work, so a host clock read after it covers that work.

    Only the thread's current stream: an encode worker runs Encode and local
    Prefill on two streams (two green-context lanes, live/gpu/green.py), and a
    device-wide sync would make the encode end stamp, and the encode loop,
    wait for the prefill beside it. On the legacy default stream (no lanes)
    this is the same wait as before.
    """
    if torch.device(device).type == "cuda":
        torch.cuda.current_stream().synchronize()
