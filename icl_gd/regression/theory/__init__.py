"""The theory of linear attention as referee: closed forms for what a trained linear-attention layer converges to
and what it costs (the one-layer optimum and its shifts, the plateaus of separate key and query weights, the
asymptotics of finite pretraining), and the trained layers they referee."""
