"""Population references: the expected query loss of one-step GD, online GD and normalised LMS over a task law, in closed form, with their optimal step sizes."""
