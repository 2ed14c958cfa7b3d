"""Beyond the papers (issue 22): which algorithm a deep trained model runs, layer by layer (Fu et al. 2023, arXiv
2310.17086; Ahn et al., NeurIPS 2023). Each claim quotes its source and is marked as beyond the papers."""

from __future__ import annotations

from icl_gd.platform.claims.model import Claim

BEYOND_ALGORITHM_CLAIMS: tuple[Claim, ...] = ()
