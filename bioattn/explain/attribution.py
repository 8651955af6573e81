"""The method-generic attribution methods (``bioattn explain ... --method NAME``), their costs, and the Captum calls."""
from __future__ import annotations

from typing import Any, Callable, Mapping

import torch
from torch import Tensor, nn

from bioattn.errors import UserInputError

METHODS = ("integrated_gradients", "relevance", "gradient_x_input", "rollout", "random")
#: Riemann steps of Integrated Gradients (Captum's Gauss-Legendre rule).
IG_STEPS = 32
IG_BATCH = 64
METHOD_COST = {"integrated_gradients": 2 * IG_STEPS, "relevance": 1, "gradient_x_input": 1, "rollout": 0.5, "random": 0.0,
               "ism": 70.0}
METHOD_LABELS = {"integrated_gradients": "Integrated Gradients attribution",
                 "relevance": "attention relevance (Chefer)", "gradient_x_input": "gradient × input attribution",
                 "rollout": "rollout influence", "random": "random ranking (floor)",
                 "ism": "in-silico mutagenesis (log-odds change)"}


def method_label(method: str, labels: Mapping[str, str] = METHOD_LABELS) -> str:
    """The axis label of ``method``'s values in ``labels`` (default :data:`METHOD_LABELS`)."""
    return labels[check_method(method, tuple(labels))]


def check_method(method: str, methods: tuple[str, ...] = METHODS) -> str:
    """``method`` if it is one of ``methods``, else a :class:`~bioattn.errors.UserInputError`."""
    if method not in methods:
        raise UserInputError(f"unknown attribution method {method!r}; choose one of {', '.join(methods)}")
    return method


def random_map(shape: tuple[int, ...], generator: torch.Generator) -> Tensor:
    """Uniform ``[0, 1)`` values of ``shape`` (float32, CPU) from ``generator``."""
    return torch.rand(shape, generator=generator)


def layer_attribution(method: str, forward: Callable[..., Tensor], layer: nn.Module, inputs: Tensor, *,
                      baselines: Tensor | None = None, additional_forward_args: Any = None,
                      internal_batch_size: int = IG_BATCH) -> Tensor:
    """Captum ``method`` attribution of ``forward(inputs, *additional_forward_args) -> (B,)`` on ``layer``'s output."""
    from captum.attr import LayerGradientXActivation, LayerIntegratedGradients
    if method == "integrated_gradients":
        explainer = LayerIntegratedGradients(forward, layer)
        return explainer.attribute(inputs, baselines=baselines, additional_forward_args=additional_forward_args,
                                   n_steps=IG_STEPS, internal_batch_size=max(internal_batch_size, len(inputs)))
    if method == "gradient_x_input":
        return LayerGradientXActivation(forward, layer).attribute(inputs, additional_forward_args=additional_forward_args)
    raise ValueError(f"not a Captum method: {method!r}")


def input_attribution(method: str, forward: Callable[[Tensor], Tensor], inputs: Tensor, *,
                      baselines: Tensor | None = None) -> Tensor:
    """Captum attribution of ``forward(inputs) -> (B,)`` on ``inputs`` itself (same shape as ``inputs``)."""
    from captum.attr import InputXGradient, IntegratedGradients
    if method == "integrated_gradients":
        return IntegratedGradients(forward).attribute(inputs, baselines=baselines, n_steps=IG_STEPS,
                                                      internal_batch_size=max(IG_BATCH // 4, len(inputs)))
    if method == "gradient_x_input":
        return InputXGradient(forward).attribute(inputs)
    raise ValueError(f"not a Captum method: {method!r}")


def predicted_log_odds(logits: Tensor, classes: Tensor) -> Tensor:
    """Log-odds ``log p_c - log(1 - p_c)`` of ``classes (B,)``; logits ``(B,)`` (sigmoid, class 1) or ``(B, C)``."""
    if logits.dim() == 1:
        return torch.where(classes == 1, logits, -logits)
    chosen = logits.gather(1, classes[:, None])[:, 0]
    others = logits.masked_fill(torch.nn.functional.one_hot(classes, logits.shape[1]).bool(), float("-inf"))
    return chosen - torch.logsumexp(others, dim=1)


def class_probability(probabilities: Tensor, classes: Tensor) -> Tensor:
    """Probability of class ``classes (B,)``: ``probabilities`` is ``(B,)`` (of class 1) or ``(B, C)``."""
    if probabilities.dim() == 1:
        return torch.where(classes == 1, probabilities, 1 - probabilities)
    return probabilities.gather(1, classes[:, None])[:, 0]
