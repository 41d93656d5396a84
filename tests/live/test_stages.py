"""Stage functions: continuous batching equals decoding each request alone; positions matter."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from easerve_core.request import Modality
from live.families import get_family
from live.stages import DecodeBatch, KVState, encode_batch, prefill
from live.zoo import ModelSpec, build_model

FAMILY_INPUTS = [
    ("llava-next", Modality.IMAGE, [[40], [16], [70], [88]]),
    ("qwen2.5-vl", Modality.VIDEO, [[16], [9], [24], [36]]),
    ("qwen2-audio", Modality.AUDIO, [[30], [8], [20], [50]]),
]


def _prefilled(name: str, modality: Modality, token_lists: list[list[int]]):
    model = build_model(ModelSpec(name=name, size="tiny", init_std=0.5))
    family = get_family(name)
    states = []
    for i, tokens in enumerate(token_lists):
        rng = np.random.default_rng(i)
        mm = family.make_input(model.config, modality, tokens, rng)
        text = [1, *rng.integers(4, 400, 6 + 5 * i).tolist()]
        feats = encode_batch(model, family, [mm])[0]
        states.append(prefill(model, family.prefill_inputs(model, text, modality, mm.meta, feats)))
    return model, family, states


def _alone(model, mrope: bool, state: KVState, steps: int) -> list[int]:
    batch = DecodeBatch(model, mrope=mrope)
    batch.join("x", state, steps)
    while not batch.finished():
        batch.step()
    return batch.tokens("x")


@pytest.mark.parametrize(("name", "modality", "tokens"), FAMILY_INPUTS)
def test_joins_and_leaves_match_decoding_alone(name, modality, tokens):
    model, family, states = _prefilled(name, modality, tokens)
    budgets = {"a": 9, "b": 4, "c": 7, "d": 6}
    state_of = dict(zip("abcd", states, strict=True))
    # a, b at step 0; c joins at 3; b leaves after 4 steps; d (longest) joins at 6.
    joins = {0: ["a", "b"], 3: ["c"], 6: ["d"]}
    batch = DecodeBatch(model, mrope=family.mrope)
    got: dict[str, list[int]] = {}
    for step in range(40):
        for key in joins.get(step, []):
            batch.join(key, state_of[key], budgets[key])
        if not len(batch) and step > 6:
            break
        batch.step()
        done = batch.finished()
        for key in done:
            got[key] = batch.tokens(key)
        batch.leave(done)
    assert set(got) == set(budgets)
    for key, state in state_of.items():
        assert got[key] == _alone(model, family.mrope, state, budgets[key]), key
        assert len(got[key]) == budgets[key] + 1


def test_mrope_delta_changes_the_tokens():
    """With init 0.5 a decode that forgets rope_delta goes wrong (pitfall P1/P4)."""
    model, _family, states = _prefilled("qwen2.5-vl", Modality.IMAGE, [[24]])
    state = states[0]
    assert state.rope_delta != 0
    wrong = dataclasses.replace(state, rope_delta=0)
    assert _alone(model, True, state, 8) != _alone(model, True, wrong, 8)


def test_join_checks_its_arguments():
    model, _family, states = _prefilled("llava-next", Modality.IMAGE, [[16]])
    batch = DecodeBatch(model, mrope=False)
    with pytest.raises(ValueError, match="steps"):
        batch.join("a", states[0], 0)
    batch.join("a", states[0], 2)
    with pytest.raises(ValueError, match="already"):
        batch.join("a", states[0], 2)
