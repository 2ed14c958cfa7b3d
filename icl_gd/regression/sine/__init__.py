"""Sine regression and learned feature maps (von Oswald et al. 2023, §4, Prop. 2): the tasks and the models that read them through an MLP."""
