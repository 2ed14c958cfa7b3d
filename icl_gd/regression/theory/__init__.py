"""The theory of linear attention as referee: closed forms for what a trained linear-attention layer converges to
and what it costs (the one-layer optimum and its shifts, the plateaus of separate key and query weights), and the
trained layers they referee. The asymptotics of pretraining on finitely many tasks have a room of their own,
``icl_gd.regression.task_diversity``."""
