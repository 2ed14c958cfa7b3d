"""The dual form of trained linear layers (Irie, Csordás & Schmidhuber 2022): record, store, read, verify, remove.

- ``recorder`` / ``storage``: ``DualRecorder`` records each linear layer's keys and errors during training into an
  append-only key store (chunked memory-mapped tables with a manifest);
- ``layer``: a stored layer in dual form (``DualLayer``: step coefficients, keys, values);
- ``form``: ``DualForm``, a trained network in dual form: layers, layer inputs, verification, scanning with scorers,
  key removal; every analysis asks it;
- ``scan`` / ``verification`` / ``removal``: the blocked pass over the units, the float64 check against the
  weights, the units' contribution to the weights;
- ``training``: the one SGD loop, recorded or not;
- ``classifier`` / ``settings`` / ``datasets``: the MLP, the two image tasks, training in the single/joint/continual
  settings; ``lstm`` / ``corpus`` / ``text_sources`` / ``lm_training``: the language model;
- ``analysis`` / ``lm_analysis`` / ``attribution`` / ``lds``: what a trained network's dual form says;
- ``study``: ``DualRun``, the skeleton of the dual-form studies.
"""
