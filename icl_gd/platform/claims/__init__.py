"""The papers' claims as checks over study runs (``icl-gd reproduce``): the registry, verdicts, report."""

from icl_gd.platform.claims.model import Claim, ClaimResult, Direction, RunPlan, SeedEvidence, Verdict, decide, evaluate_claim
from icl_gd.platform.claims.registry import CLAIMS, claim_ids

__all__ = ["CLAIMS", "Claim", "ClaimResult", "Direction", "RunPlan", "SeedEvidence", "Verdict", "claim_ids",
           "decide", "evaluate_claim"]
