"""The papers' claims as checks over study runs (``icl-gd reproduce``): the registry, verdicts, report."""

from icl_gd.claims.model import (Claim, ClaimResult, Direction, Kind, RunPlan, SeedEvidence, Verdict, decide,
                                          evaluate_claim)
from icl_gd.claims.registry import ALL_CHECKS, CLAIMS, CONSTRUCTION_CHECKS, claim_ids

__all__ = ["ALL_CHECKS", "CLAIMS", "CONSTRUCTION_CHECKS", "Claim", "Kind", "ClaimResult", "Direction", "RunPlan", "SeedEvidence", "Verdict", "claim_ids",
           "decide", "evaluate_claim"]
