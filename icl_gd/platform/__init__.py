"""What runs studies: one run into a directory (runner), the memory pre-check, the products floor of a study's
declared training, and sweeps on a process pool or Ray. The claims that read the runs are ``icl_gd.claims``."""
