"""Online learners of in-context regression and the fast-weight layers that run them: the delta rule, the mesa layer, their trained forms, references, interpolation and order sensitivity."""
