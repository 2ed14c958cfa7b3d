"""The dual form of trained linear layers (Irie, Csordás & Schmidhuber 2022): record, store, verify, query.

- ``recorder``: ``DualRecorder`` records each linear layer's keys and errors during training;
- ``storage``: append-only chunked memory-mapped tables with a manifest;
- ``units`` / ``verification``: step coefficients, keys and values, and the float64 check against the weights;
- ``queries``: blocked scoring of queries against every key, key removal;
- ``training``: the one recorded SGD loop;
- ``classifier`` / ``settings``: the MLP, the two image tasks, training in the single/joint/continual settings;
- ``analysis`` / ``figures``: what a trained setting's dual form says, and its figures.
"""
