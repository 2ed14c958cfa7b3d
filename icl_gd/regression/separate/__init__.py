"""Separate x and y tokens (von Oswald et al. 2023, §4, Prop. 3): the token layout and the softmax-copy model."""
