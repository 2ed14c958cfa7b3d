import pytest
import torch

torch.set_num_threads(2)


@pytest.fixture(autouse=True)
def _seeded_global_rng():
    """Every test starts from the same global torch seed, so a test's outcome does not depend on which tests ran
    before it (module initialisations without an explicit generator draw from the global stream)."""
    with torch.random.fork_rng():
        torch.manual_seed(20221207)
        yield
