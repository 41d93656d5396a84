"""Make-before-break moves between two deployments: who stays, where the new workers go, in what order.

A pure planner (docs/controller.md, "Make-before-break"): given the workers
that serve now (as :class:`Slot` values: a stage, its GPUs, and for encode
whether the GPUs hold the LM), the GPUs still busy draining, and the target
deployment's slots, :func:`plan_moves` returns a :class:`MovePlan`:

* every serving worker whose kind (stage, TP, LM held) the target still
  wants **stays** where it is (lowest GPUs first), whatever GPU the build's
  layout would give it;
* each missing worker comes up on **free GPUs** first, at once (step 0):
  the workers it replaces keep serving until it is warm (Dynamo's planner:
  new workers warm before old ones leave);
* with no free GPU the move is **staged**: each later step drains one
  leaving worker, chosen so that its stage keeps a serving worker (then one
  whose GPUs let a missing worker come up, then the lowest GPUs), and brings
  up every missing worker that now fits; the next step starts once that
  step's workers are warm and its drain retired;
* the leaving workers nothing needs the GPUs of drain last, when everything
  new is warm.

With ``serve_first`` (off by default) a stage whose every serving worker
leaves comes up first: its missing worker takes the first GPUs that fit it,
the GPUs it could take are kept from other missing workers until it is up,
and the next drain is one that frees them; so a TP-4 decoder that becomes a
TP-2 one elsewhere keeps serving until the new one is warm, instead of
draining while Decode has no worker (docs/controller.md, "Moves that pay").

A stage is left without a serving worker only where the plan says so: a
step lists it in ``unserved`` (its last worker drains before a new one is
up, because no other order frees the GPUs its new workers need), and a stage
the target drops drains last. A new worker of ``tp`` GPUs takes consecutive
GPUs of one node, aligned to ``tp`` where it can. When the kept workers
fragment the GPUs so that a missing worker fits nowhere, the plan falls back
to the build's layout (``MovePlan.fallback``): only workers already on their
layout slot stay, the others drain one overlapping group at a time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

STAGES = ("encode", "prefill", "decode")


@dataclass(frozen=True, slots=True)
class Slot:
    """One worker's place: its stage, its GPUs, and (encode) whether the GPUs hold the LM."""

    stage: str
    gpus: tuple[int, ...]
    local_prefill: bool = False

    @property
    def tp(self) -> int:
        return len(self.gpus)

    @property
    def role(self) -> str:
        """The role whose weights the GPUs hold (calibration.reconfig.ROLES)."""
        if self.stage != "encode":
            return self.stage
        return "encode+prefill" if self.local_prefill else "encode"

    @property
    def kind(self) -> tuple[str, int, bool]:
        """What a worker is, wherever it sits: stage, TP, LM held."""
        return (self.stage, self.tp, self.local_prefill)


@dataclass(frozen=True, slots=True)
class Step:
    """Drain ``drain``, bring up ``up`` (each on GPUs free once the drains on them retired);
    ``unserved``: the stages left with no serving worker while the step runs (a planned gap)."""

    drain: tuple[Slot, ...] = ()
    up: tuple[Slot, ...] = ()
    unserved: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MovePlan:
    """Who stays (``keep``) and the steps that reach the target, in order."""

    keep: tuple[Slot, ...]
    steps: tuple[Step, ...]
    fallback: bool = False

    @property
    def target(self) -> tuple[Slot, ...]:
        """The slots that serve once every step is done, in GPU order."""
        return tuple(sorted((*self.keep, *(s for step in self.steps for s in step.up)),
                            key=lambda s: s.gpus))

    @property
    def gpus_moved(self) -> int:
        return sum(s.tp for step in self.steps for s in step.up)


def plan_moves(current: Sequence[Slot], target: Sequence[Slot], *, num_gpus: int, gpus_per_node: int,
               busy: Iterable[int] = (), serve_first: bool = False) -> MovePlan:
    """The moves from ``current`` (serving, or on their way) to ``target`` (the target
    deployment's slots in the build's layout: their kinds, and the fallback's places); ``busy``:
    GPUs held by workers already draining (free once they retire); ``serve_first``: a stage
    losing its every worker comes up first. See the module docstring."""
    pending = frozenset(busy)
    held = {g for s in current for g in s.gpus} | pending
    free = set(range(num_gpus)) - held
    plan = _greedy(current, target, free, pending, num_gpus, gpus_per_node, serve_first)
    if plan is None:
        plan = _at_layout(current, target, free, pending)
    return plan


def _match(current: Sequence[Slot], target: Sequence[Slot]) -> tuple[list[Slot], list[Slot], list[Slot]]:
    """(kept, leaving, missing kinds as the target's slots): kinds matched lowest GPUs first."""
    wanted = Counter(s.kind for s in target)
    keep, leaving = [], []
    for slot in sorted(current, key=lambda s: s.gpus):
        if wanted[slot.kind] > 0:
            wanted[slot.kind] -= 1
            keep.append(slot)
        else:
            leaving.append(slot)
    missing = []
    for slot in sorted(target, key=lambda s: (STAGES.index(s.stage), -s.tp, s.gpus)):
        if wanted[slot.kind] > 0:
            wanted[slot.kind] -= 1
            missing.append(slot)
    return keep, leaving, missing


def _place(kind: Slot, free: set[int], num_gpus: int, per_node: int) -> Slot | None:
    """``kind`` on ``tp`` consecutive free GPUs of one node, aligned to ``tp`` if it can be."""
    tp = kind.tp
    starts = [g for g in range(num_gpus - tp + 1) if g // per_node == (g + tp - 1) // per_node
              and all(x in free for x in range(g, g + tp))]
    if not starts:
        return None
    start = min(starts, key=lambda g: (g % tp != 0, g))
    return Slot(kind.stage, tuple(range(start, start + tp)), kind.local_prefill)


def _bring_up(missing: list[Slot], free: set[int], num_gpus: int, per_node: int,
              first: Sequence[Slot] = (), held: frozenset[int] = frozenset()) -> list[Slot]:
    """Place every missing worker that fits (in order; ``first``'s kinds before the others, which
    keep off the GPUs ``first`` could take), taking its GPUs out of ``free``."""
    placed = []
    for kind in sorted(missing, key=lambda k: k not in first):
        reserved = set() if kind in first else _windows(first, missing, held, num_gpus, per_node)
        slot = _place(kind, free - reserved, num_gpus, per_node)
        if slot is not None:
            missing.remove(kind)
            free.difference_update(slot.gpus)
            placed.append(slot)
    return placed


def _windows(first: Sequence[Slot], missing: list[Slot], held: frozenset[int], num_gpus: int,
             per_node: int) -> set[int]:
    """The GPUs a missing worker of ``first`` could take: ``tp`` aligned consecutive GPUs of one
    node, none ``held`` by a worker that stays or is already placed."""
    out: set[int] = set()
    for kind in first:
        if kind not in missing:
            continue
        tp = kind.tp
        for g in range(0, num_gpus - tp + 1, tp):
            window = set(range(g, g + tp))
            if g // per_node == (g + tp - 1) // per_node and not window & held:
                out |= window
    return out


def _unserved(serving: Counter[str], wanted: set[str]) -> tuple[str, ...]:
    return tuple(s for s in STAGES if s in wanted and serving[s] <= 0)


def _drain_rank(slot: Slot, serving: Counter[str], wanted: set[str], missing: list[Slot], free: set[int],
                num_gpus: int, per_node: int) -> tuple[bool, bool, tuple[int, ...]]:
    """Which leaving worker drains next: one whose stage keeps a serving worker, then one whose GPUs
    let a missing worker come up, then the lowest GPUs."""
    stays_served = serving[slot.stage] > 1 or slot.stage not in wanted
    helps = any(_place(k, free | set(slot.gpus), num_gpus, per_node) for k in missing)
    return (not stays_served, not helps, slot.gpus)


def _greedy(current: Sequence[Slot], target: Sequence[Slot], free: set[int], pending: frozenset[int],
            num_gpus: int, per_node: int, serve_first: bool = False) -> MovePlan | None:
    keep, leaving, missing = _match(current, target)
    wanted = {s.stage for s in target}
    serving = Counter(s.stage for s in current)
    free = set(free)
    steps = []
    # serve_first: the missing workers of a stage whose every current worker leaves
    losing = {s.stage for s in leaving} - {s.stage for s in keep}
    first = [k for k in missing if k.stage in losing] if serve_first else []
    placed = {g for s in keep for g in s.gpus} | pending

    def bring_up() -> list[Slot]:
        if not first:
            return _bring_up(missing, free, num_gpus, per_node)
        up = _bring_up(missing, free, num_gpus, per_node, first, frozenset(placed))
        placed.update(g for s in up for g in s.gpus)
        return up

    up = bring_up()
    if up:
        steps.append(Step(up=tuple(up)))
        serving.update(s.stage for s in up)
    while missing:
        if not leaving:
            if not pending - free:
                return None  # the kept workers fragment the GPUs: no place for a missing one
            free |= pending  # wait for the workers already draining
            up = bring_up()
            if not up:
                return None
            steps.append(Step(up=tuple(up), unserved=_unserved(serving, wanted)))
            serving.update(s.stage for s in up)
            continue
        reserved = _windows(first, missing, frozenset(placed), num_gpus, per_node) if first else set()
        pick = min(leaving, key=lambda slot: (
            _drain_rank(slot, serving, wanted, missing, free, num_gpus, per_node)[0],
            not set(slot.gpus) & reserved,  # serve_first: free the GPUs the losing stage's worker needs
            *_drain_rank(slot, serving, wanted, missing, free, num_gpus, per_node)[1:]))
        leaving.remove(pick)
        free |= set(pick.gpus)
        placed.difference_update(pick.gpus)
        serving[pick.stage] -= 1
        unserved = _unserved(serving, wanted)
        up = bring_up()
        steps.append(Step(drain=(pick,), up=tuple(up), unserved=unserved))
        serving.update(s.stage for s in up)
    if leaving:
        serving.subtract(s.stage for s in leaving)
        steps.append(Step(drain=tuple(leaving), unserved=_unserved(serving, wanted)))
    return MovePlan(keep=tuple(keep), steps=tuple(steps))


def _at_layout(current: Sequence[Slot], target: Sequence[Slot], free: set[int],
               pending: frozenset[int]) -> MovePlan:
    """The fallback: the build's layout, one overlapping group of leaving workers at a time."""
    on_place = set(target)
    keep = [s for s in current if s in on_place]
    leaving = sorted((s for s in current if s not in on_place), key=lambda s: s.gpus)
    missing = [s for s in target if s not in set(keep)]
    wanted = {s.stage for s in target}
    serving = Counter(s.stage for s in current)
    free = set(free) | set(pending)  # a slot waits for the drains on its GPUs (the roster's rule)
    steps = []
    while missing:
        fits = [s for s in missing if set(s.gpus) <= free]
        drain: list[Slot] = []
        if not fits:
            first = missing[0]
            drain = [x for x in leaving if set(x.gpus) & set(first.gpus)]
            for x in drain:
                leaving.remove(x)
                free |= set(x.gpus)
                serving[x.stage] -= 1
            fits = [s for s in missing if set(s.gpus) <= free]
        unserved = _unserved(serving, wanted)
        for s in fits:
            missing.remove(s)
            free -= set(s.gpus)
        steps.append(Step(drain=tuple(drain), up=tuple(fits), unserved=unserved))
        serving.update(s.stage for s in fits)
    if leaving:
        serving.subtract(s.stage for s in leaving)
        steps.append(Step(drain=tuple(leaving), unserved=_unserved(serving, wanted)))
    return MovePlan(keep=tuple(keep), steps=tuple(steps), fallback=True)
