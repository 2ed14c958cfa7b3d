"""Every claim of both papers that icl-gd checks, as declared objects (``CLAIMS``), and the construction checks
(``CONSTRUCTION_CHECKS``: identities of icl-gd's own code, reported in a table of their own, not counted as claims).

Each claim names its place in the paper (von Oswald et al.: arXiv 2212.07677v2, 31 May 2023), quotes the sentence it
tests, and says where its threshold comes from: a number the paper gives, or a stated rule of ours (``_RULES``),
fixed before any run; none was tuned to make a claim hold. ``--smoke`` budgets are cheaper runs of the same studies
that cannot settle an empirical claim (``Claim.settled_by_quick``): they show the value, never a verdict.
"""

from icl_gd.claims.claim import VERIFY_STUDY, Claim
from icl_gd.core.errors import ConfigError
from icl_gd.claims.registry.beyond_algorithms import BEYOND_ALGORITHM_CLAIMS
from icl_gd.claims.registry.beyond_asymptotics import BEYOND_ASYMPTOTIC_CLAIMS
from icl_gd.claims.registry.beyond_foreign import BEYOND_FOREIGN_CLAIMS
from icl_gd.claims.registry.beyond_online import BEYOND_ONLINE_CLAIMS
from icl_gd.claims.registry.beyond_plateaus import BEYOND_PLATEAU_CLAIMS
from icl_gd.claims.registry.beyond_sequence import BEYOND_SEQUENCE_CLAIMS
from icl_gd.claims.registry.beyond_spotlights import BEYOND_SPOTLIGHT_CLAIMS
from icl_gd.claims.registry.beyond_theory import BEYOND_THEORY_CLAIMS
from icl_gd.claims.registry.checks import CONSTRUCTION_CHECKS
from icl_gd.claims.registry.irie import IRIE_CLAIMS
from icl_gd.claims.registry.von_oswald_architectures import ARCHITECTURE_CLAIMS
from icl_gd.claims.registry.von_oswald_models import DEEPER_CLAIMS
from icl_gd.claims.registry.von_oswald_one_layer import ONE_LAYER_CLAIMS

__all__ = ["ALL_CHECKS", "CLAIMS", "CONSTRUCTION_CHECKS", "PENDING_CLAIMS", "VERIFY_STUDY", "claim_ids"]

VON_OSWALD_CLAIMS = ONE_LAYER_CLAIMS + DEEPER_CLAIMS + ARCHITECTURE_CLAIMS
_DECLARED: tuple[Claim, ...] = (VON_OSWALD_CLAIMS + IRIE_CLAIMS + BEYOND_ALGORITHM_CLAIMS + BEYOND_SPOTLIGHT_CLAIMS
                                + BEYOND_FOREIGN_CLAIMS + BEYOND_ONLINE_CLAIMS + BEYOND_THEORY_CLAIMS
                                + BEYOND_PLATEAU_CLAIMS + BEYOND_ASYMPTOTIC_CLAIMS + BEYOND_SEQUENCE_CLAIMS)
# An identity declared beside a paper's claims (a construction check on that paper's runs) is reported with the
# construction checks, never counted as a claim.
CLAIMS: tuple[Claim, ...] = tuple(c for c in _DECLARED if not c.is_construction)
CONSTRUCTION_CHECKS = CONSTRUCTION_CHECKS + tuple(c for c in _DECLARED if c.is_construction)

ALL_CHECKS: tuple[Claim, ...] = CLAIMS + CONSTRUCTION_CHECKS

# Declared with their rules fixed, but their full-budget runs are not yet made: neither judged nor counted (a claim
# with no run would read "inconclusive" and blur the counts); the tests hold them to every claim's form. One moves
# into ``_DECLARED`` when its runs are kept in docs/full-run.
PENDING_CLAIMS: tuple[Claim, ...] = ()


def check_sentences(claims: tuple[Claim, ...]) -> None:
    """A sentence's parts are claims of the same paper, neither variants nor sentences with parts of their own, and
    each id once (ConfigError otherwise): the counts rest on it."""
    by_id = {c.id: c for c in claims}
    if len(by_id) != len(claims):
        raise ConfigError("two claims share an id")
    for claim in claims:
        for part_id in claim.parts:
            part = by_id.get(part_id)
            if part is None or part.paper != claim.paper or part.variant_of or part.parts or part_id == claim.id:
                raise ConfigError(f"claim {claim.id}: part {part_id!r} is not another claim of its paper without "
                                  "parts of its own")
        if claim.variant_of and claim.variant_of not in by_id:
            raise ConfigError(f"claim {claim.id}: variant of unknown claim {claim.variant_of!r}")


check_sentences(CLAIMS + PENDING_CLAIMS)


def claim_ids() -> list[str]:
    """Every registered id: the claims', then the construction checks'."""
    return [c.id for c in ALL_CHECKS]
