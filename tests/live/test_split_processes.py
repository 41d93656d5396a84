"""Split execution in separate worker processes gives exactly model.generate's tokens.

Encode, Prefill and Decode run in different processes (the KV cache moves
between them through shared memory); half the requests take the local
prefill path inside the encode process. Decode runs one request at a time
(``max_num_decode_seqs = 1``) so the comparison with ``generate`` is exact;
batched decode is compared with decoding alone in test_stages.py.
"""

from __future__ import annotations

import pytest
import torch

from live.trial import Trial
from live.zoo import build_model
from tests.live.conftest import live_config, live_plan


@pytest.mark.parametrize("model", ["llava-next", "qwen2.5-vl", "qwen2-audio"])
def test_split_equals_generate(model, no_orphans):
    config = live_config(model, num_requests=6, live={"init_std": 0.5},
                         deployment={"max_num_decode_seqs": 1, "remote_fraction": 0.5})
    with Trial(live_plan(config)) as trial:
        trial.start()
        result = trial.run()
        jobs = {j.request.request_id: j for j in trial.build_jobs()}
        tokens = dict(trial.ledger.tokens)
        reference = build_model(trial.spec)
    records = result.records
    assert (records["status"] == "ok").all(), records["error"].tolist()
    assert set(records["route"]) == {"local", "remote"}
    family = trial.spec.family
    for rid, job in jobs.items():
        kwargs = family.generate_kwargs(reference, list(job.text_ids), job.mm)
        n = job.request.output_tokens
        with torch.no_grad():
            out = reference.generate(**kwargs, max_new_tokens=n, min_new_tokens=n, do_sample=False)
        want = out[0, kwargs["input_ids"].shape[1]:].tolist()
        assert tokens[rid] == want, f"request {rid}"
