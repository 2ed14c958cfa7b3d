"""`icl-gd compare`: any in-context learner against GD, GD++, Newton and least squares, with the GPT-style model and Garg et al.'s curriculum."""
