"""Beyond the papers (issue 23): are the dual form's spotlights faithful? Attention against retraining (LDS,
leave-k-out) and against attribution methods. Each claim is marked as ours, beyond the paper."""

from __future__ import annotations

from icl_gd.platform.claims.model import Claim

BEYOND_SPOTLIGHT_CLAIMS: tuple[Claim, ...] = ()
