"""easerve_core: the pure policies and shared vocabulary of easerve.

No simpy, torch or transformers here, no file I/O and no clock reads: every method that
depends on time takes ``now`` in seconds (DESIGN.md §3). Public names:
requests and records (:mod:`.request`), workloads (:mod:`.workload`), the
encode batchers (:mod:`.batcher`), routers (:mod:`.router`), the SM-share
table (:mod:`.sm_share`), deployments and clusters (:mod:`.deployment`),
SLOs and goodput (:mod:`.slo`), the profile contract (:mod:`.profile`), run
results (:mod:`.result`) and experiment configs (:mod:`.config`).
"""

from easerve_core.batcher import AdaptiveBatcher, Batch, DispatchReason, FixedBatcher
from easerve_core.cluster import Cluster
from easerve_core.deployment import Architecture, BatchingMode, Deployment, SMSharing, StageGroup
from easerve_core.profile import ParallelProfile, ProfileDoc, StageProfile
from easerve_core.request import (
    RECORD_COLUMNS,
    Modality,
    Record,
    Request,
    Status,
    records_from_columns,
    records_to_frame,
)
from easerve_core.router import DeficitRouter, RandomRouter, Route
from easerve_core.slo import SLO, SLO_TIERS, Summary, goodput_rps, summarize
from easerve_core.sm_share import SMShareTable

__all__ = [
    "RECORD_COLUMNS",
    "SLO",
    "SLO_TIERS",
    "AdaptiveBatcher",
    "Architecture",
    "Batch",
    "BatchingMode",
    "Cluster",
    "DeficitRouter",
    "Deployment",
    "DispatchReason",
    "FixedBatcher",
    "Modality",
    "ParallelProfile",
    "ProfileDoc",
    "RandomRouter",
    "Record",
    "Request",
    "Route",
    "SMShareTable",
    "SMSharing",
    "StageGroup",
    "StageProfile",
    "Status",
    "Summary",
    "goodput_rps",
    "records_from_columns",
    "records_to_frame",
    "summarize",
]
