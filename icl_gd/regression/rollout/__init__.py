"""A trained layer applied past its training depth, with damping, beside GD run as long (von Oswald et al. 2023, §3)."""
