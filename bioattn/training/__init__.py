"""The shared training engine: ``Trainer(model, dataset, TrainConfig(...), run_dir, loss_fn=...).fit()``."""
from bioattn.training.config import TrainConfig, load_yaml_config
from bioattn.training.curves import plot_curves
from bioattn.training.rng import seed_everything
from bioattn.training.run_dir import check_run_dir, prepare_run_dir, write_run_config
from bioattn.training.loop_state import FitResult
from bioattn.training.trainer import NonFiniteLossError, Trainer

__all__ = ["FitResult", "NonFiniteLossError", "TrainConfig", "Trainer", "load_yaml_config", "plot_curves",
           "check_run_dir", "prepare_run_dir", "seed_everything", "write_run_config"]
