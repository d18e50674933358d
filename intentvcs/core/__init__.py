"""The shared core: what training, export, serving and the analyses all need, torch-free.

The ground floor (docs/ARCHITECTURE.md): the canonical data format
(``dataio``), atomic writes (``atomic``), versioned file formats
(``formats``), the model interface every analysis takes (``predictor``), the
decision layer (``decision``, ``calibration``, ``thresholds``, ``oos``),
label relations, evaluation scores (``scoring``, ``evaluation``), the bundle
manifest, the spelling normaliser, and the perturbation operators with the
robustness suite. It imports no other package of ours and never torch,
transformers or optimum, because the serving path stands on it.
"""
