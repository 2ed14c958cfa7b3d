"""In-context learning in a sequence (von Oswald et al. 2023b): next-token prediction of linear dynamical systems,
the least-squares and gradient-descent referees of every position, the causal layers that run them and the models
trained on them."""
