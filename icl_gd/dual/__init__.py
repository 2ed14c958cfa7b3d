"""The dual form of trained linear layers (Irie, Csordás & Schmidhuber 2022): record, store, verify, query."""
