"""Model specs (scripts/model_spec.py's features) and the calibrated model file that the
daemon tests on predicted utilisation share: VGG-16 at batch 32, which calibrated_model
predicts busy, and a tiny MLP, which it predicts idle."""
import os

CALIBRATED_MODEL = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data",
                                                "models", "calibrated_memory.json"))
VGG = {"depth": 16, "total_activations": 28676072, "total_parameters": 138357544, "batch_size": 32,
       "activation": "ReLU", "layer_counts": {"conv2d": 13, "linear": 3, "relu": 15}}
TINY = {"depth": 2, "total_activations": 36, "total_parameters": 2212, "batch_size": 8, "activation": "ReLU",
        "layer_counts": {"linear": 2, "relu": 1}}
