"""In-context linear (and sine) regression, von Oswald et al. 2023: tasks and token layouts, linear self-attention,
GD and GD++ with their tuners, baselines, alignment metrics, the training loop and the regression study run."""
