"""The papers' claims as checks over study runs (``icl-gd reproduce``): the registry, verdicts, report."""

from icl_gd.claims.claim import Claim, Direction, Kind, RunPlan
from icl_gd.claims.evidence import SeedEvidence
from icl_gd.claims.verdict import ClaimResult, Verdict, decide, evaluate_claim
from icl_gd.claims.registry import ALL_CHECKS, CLAIMS, CONSTRUCTION_CHECKS, claim_ids

__all__ = ["ALL_CHECKS", "CLAIMS", "CONSTRUCTION_CHECKS", "Claim", "Kind", "ClaimResult", "Direction", "RunPlan", "SeedEvidence", "Verdict", "claim_ids",
           "decide", "evaluate_claim"]
