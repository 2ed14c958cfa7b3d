"""The platform-neutral core every study builds on: config keys, typed errors, atomic result files, run
directories and their lock, progress, figures and the study contract."""
