"""What runs studies and reads their results: one run into a directory (runner), sweeps on a process pool or Ray,
the papers' claims and their report, and the departures from the papers' set-ups."""
