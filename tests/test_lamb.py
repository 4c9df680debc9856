"""LAMB against a step-by-step reference of the official TensorFlow optimizer, and the original ALBERT schedule."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
import torch
from torch import nn

from albert_hf.configuration import AlbertConfig
from albert_hf.modeling import AlbertForPreTraining
from albert_hf.training.lamb import Lamb, PartitionLayout, Segment, lamb_parameter_groups
from albert_hf.training.schedules import get_albert_polynomial_decay_schedule


def reference_lamb_step(w, m, v, g, *, lr, beta1, beta2, eps, weight_decay, adapt):
    """One step of google-research/albert lamb_optimizer.py, transcribed in float64 numpy."""
    m = beta1 * m + (1.0 - beta1) * g
    v = beta2 * v + (1.0 - beta2) * g * g
    update = m / (np.sqrt(v) + eps)
    if weight_decay:
        update = update + weight_decay * w
    ratio = 1.0
    if adapt:
        w_norm, u_norm = np.linalg.norm(w), np.linalg.norm(update)
        ratio = w_norm / u_norm if (w_norm > 0 and u_norm > 0) else 1.0
    return w - ratio * lr * update, m, v


def test_matches_official_reference_over_several_steps():
    rng = np.random.default_rng(0)
    shapes = {"weight": (7, 5), "bias": (5,), "zero_init": (3, 4)}
    init = {name: rng.normal(size=shape) for name, shape in shapes.items()}
    init["zero_init"][:] = 0.0  # trust ratio falls back to 1 while ||w|| == 0
    params = {name: nn.Parameter(torch.tensor(value, dtype=torch.float64)) for name, value in init.items()}
    hyper = dict(lr=0.05, beta1=0.9, beta2=0.999, eps=1e-6)
    optimizer = Lamb(
        [
            {"params": [params["weight"], params["zero_init"]], "weight_decay": 0.01, "layer_adaptation": True},
            {"params": [params["bias"]], "weight_decay": 0.0, "layer_adaptation": False},
        ],
        lr=hyper["lr"],
        betas=(hyper["beta1"], hyper["beta2"]),
        eps=hyper["eps"],
    )
    reference = {name: (value.copy(), np.zeros_like(value), np.zeros_like(value)) for name, value in init.items()}
    for _ in range(5):
        grads = {name: rng.normal(size=shape) * rng.uniform(0.01, 10) for name, shape in shapes.items()}
        for name, param in params.items():
            param.grad = torch.tensor(grads[name])
        optimizer.step()
        for name, (w, m, v) in reference.items():
            decayed = name != "bias"
            reference[name] = reference_lamb_step(
                w, m, v, grads[name], weight_decay=0.01 if decayed else 0.0, adapt=decayed, **hyper
            )
    for name, param in params.items():
        np.testing.assert_allclose(param.detach().numpy(), reference[name][0], rtol=1e-12, atol=1e-12)


def test_first_step_has_no_bias_correction():
    # Without bias correction the first Adam direction is 0.1 g / (sqrt(0.001) |g| + eps) = 3.162... * sign(g);
    # with Adam's bias correction it would be sign(g).
    param = nn.Parameter(torch.zeros(4, dtype=torch.float64))
    optimizer = Lamb([param], lr=1.0, weight_decay=0.0, layer_adaptation=False, eps=1e-12)
    param.grad = torch.tensor([1.0, -2.0, 0.5, -3.0], dtype=torch.float64)
    optimizer.step()
    expected = -0.1 / math.sqrt(0.001) * torch.sign(param.grad)
    torch.testing.assert_close(param.detach(), expected)


def test_trust_ratio_makes_the_step_proportional_to_the_weight_norm():
    torch.manual_seed(0)
    param = nn.Parameter(torch.randn(16, 8, dtype=torch.float64) * 3.0)
    before = param.detach().clone()
    optimizer = Lamb([param], lr=0.01)
    param.grad = torch.randn(16, 8, dtype=torch.float64) * 1e-4  # tiny gradients: Adam's step would not care
    optimizer.step()
    step_norm = torch.linalg.vector_norm(param.detach() - before)
    torch.testing.assert_close(step_norm, 0.01 * torch.linalg.vector_norm(before))


def tiny_pretraining_model() -> AlbertForPreTraining:
    config = AlbertConfig.preset(
        "base-v2",
        vocab_size=99,
        embedding_size=16,
        hidden_size=32,
        num_attention_heads=2,
        intermediate_size=37,
        num_hidden_layers=2,
        max_position_embeddings=64,
    )
    return AlbertForPreTraining(config)


def test_parameter_groups_follow_albert_exclusions():
    model = tiny_pretraining_model()
    decayed, excluded = lamb_parameter_groups(model, weight_decay=0.01)
    assert (decayed["weight_decay"], decayed["layer_adaptation"]) == (0.01, True)
    assert (excluded["weight_decay"], excluded["layer_adaptation"]) == (0.0, False)

    names = {id(p): n for n, p in model.named_parameters()}  # named_parameters() lists a tied weight once
    decayed_names = {names[id(p)] for p in decayed["params"]}
    excluded_names = {names[id(p)] for p in excluded["params"]}
    assert decayed_names.isdisjoint(excluded_names)
    assert decayed_names | excluded_names == set(names.values())
    assert len(decayed["params"]) + len(excluded["params"]) == len(names)
    for name in excluded_names:
        assert "bias" in name or "LayerNorm" in name or "layer_norm" in name, name
    for name in decayed_names:
        assert name.endswith("weight") and "LayerNorm" not in name and "layer_norm" not in name, name
    assert "albert.embeddings.word_embeddings.weight" in decayed_names
    assert any("LayerNorm" in name for name in excluded_names)


def test_state_dict_round_trip_continues_identically():
    torch.manual_seed(0)
    model_a = tiny_pretraining_model()
    model_b = tiny_pretraining_model()
    model_b.load_state_dict(model_a.state_dict())
    batches = [(torch.randint(5, 99, (2, 12)), torch.randint(0, 2, (2,))) for _ in range(5)]

    def train(model, optimizer, steps):
        model.eval()  # no dropout: both runs must see the same computation
        for input_ids, order in steps:
            loss = model(input_ids=input_ids, labels=input_ids, sentence_order_label=order).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()

    optimizer_a = Lamb(lamb_parameter_groups(model_a), lr=0.01)
    train(model_a, optimizer_a, batches)

    optimizer_b = Lamb(lamb_parameter_groups(model_b), lr=0.01)
    train(model_b, optimizer_b, batches[:3])
    saved = pickle.loads(pickle.dumps(optimizer_b.state_dict()))
    optimizer_b = Lamb(lamb_parameter_groups(model_b), lr=0.01)
    optimizer_b.load_state_dict(saved)
    train(model_b, optimizer_b, batches[3:])

    for (name, a), b in zip(model_a.state_dict().items(), model_b.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"lr": -1.0}, "learning rate"),
        ({"betas": (0.9, 1.0)}, "betas"),
        ({"eps": 0.0}, "eps"),
        ({"weight_decay": -0.1}, "weight_decay"),
    ],
)
def test_rejects_invalid_hyperparameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Lamb([nn.Parameter(torch.zeros(1))], **kwargs)


def learning_rates(schedule_kwargs, steps, lr=1.0):
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=lr)
    scheduler = get_albert_polynomial_decay_schedule(optimizer, **schedule_kwargs)
    rates = []
    for _ in range(steps):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return rates


def test_schedule_warms_up_linearly_then_decays_from_step_zero():
    rates = learning_rates(dict(num_warmup_steps=10, num_training_steps=100), steps=151, lr=2.0)
    assert rates[0] == 0.0
    assert rates[5] == pytest.approx(1.0)  # 2.0 * 5 / 10
    # After warmup the decay is measured from step 0 (TensorFlow's polynomial_decay on global_step):
    assert rates[10] == pytest.approx(2.0 * 0.9)
    assert rates[55] == pytest.approx(2.0 * 0.45)
    assert rates[100] == 0.0 and rates[150] == 0.0


def test_schedule_power_and_no_warmup():
    rates = learning_rates(dict(num_warmup_steps=0, num_training_steps=10, power=2.0), steps=11)
    assert rates[0] == pytest.approx(1.0)
    assert rates[5] == pytest.approx(0.25)
    assert rates[10] == 0.0


def test_schedule_state_resumes():
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = get_albert_polynomial_decay_schedule(optimizer, num_warmup_steps=4, num_training_steps=20)
    for _ in range(7):
        optimizer.step()
        scheduler.step()
    state = pickle.loads(pickle.dumps(scheduler.state_dict()))
    resumed_optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    resumed = get_albert_polynomial_decay_schedule(resumed_optimizer, num_warmup_steps=4, num_training_steps=20)
    resumed.load_state_dict(state)
    assert resumed.get_last_lr() == scheduler.get_last_lr() == pytest.approx([1.0 - 7 / 20])


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(num_warmup_steps=5, num_training_steps=0),
        dict(num_warmup_steps=11, num_training_steps=10),
        dict(num_warmup_steps=1, num_training_steps=10, power=0.0),
    ],
)
def test_schedule_rejects_invalid_arguments(kwargs):
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    with pytest.raises(ValueError):
        get_albert_polynomial_decay_schedule(optimizer, **kwargs)


# --------------------------------------------------------------------------------------------------------------------
# Flat partitions (the layout DeepSpeed ZeRO hands the optimizer), on one process
# --------------------------------------------------------------------------------------------------------------------


def flat_of(pieces: list[torch.Tensor], padding: int) -> torch.Tensor:
    return torch.cat([*(piece.reshape(-1) for piece in pieces), torch.zeros(padding, dtype=pieces[0].dtype)])


def test_registered_partition_takes_each_trust_ratio_over_its_whole_tensor():
    """A flat buffer holding tensor 0 in two non-adjacent slices, tensor 1 whole and some padding steps exactly like
    the two tensors; given as one tensor it would be another optimizer."""
    generator = torch.Generator().manual_seed(0)
    shapes = [(7, 5), (3, 4)]
    whole = [nn.Parameter(torch.randn(shape, dtype=torch.float64, generator=generator)) for shape in shapes]
    reference = Lamb(whole, lr=0.05)

    def layout_of(tensors):  # [tensor 0 from element 10, tensor 1, tensor 0 up to element 10, 3 padding]
        first = tensors[0].reshape(-1)
        return [first[10:], tensors[1].reshape(-1), first[:10]]

    flat = nn.Parameter(flat_of(layout_of([p.detach() for p in whole]), padding=3))
    layout = PartitionLayout((Segment(0, 0, 25), Segment(1, 25, 12), Segment(0, 37, 10)), num_tensors=2)
    partitioned = Lamb([flat], lr=0.05)
    partitioned.register_partition(flat, layout)
    as_one_tensor = nn.Parameter(flat.detach().clone())
    unaware = Lamb([as_one_tensor], lr=0.05)
    for _ in range(3):
        grads = [torch.randn(shape, dtype=torch.float64, generator=generator) for shape in shapes]
        for param, grad in zip(whole, grads):
            param.grad = grad
        flat.grad = flat_of(layout_of(grads), padding=3)
        as_one_tensor.grad = flat.grad.clone()
        for optimizer in (reference, partitioned, unaware):
            optimizer.step()
    expected = flat_of(layout_of([p.detach() for p in whole]), padding=3)
    torch.testing.assert_close(flat.detach()[:-3], expected[:-3], rtol=1e-12, atol=1e-12)
    assert (as_one_tensor.detach() - flat.detach())[:-3].abs().max() > 1e-3


def test_a_tensor_swapped_in_by_an_engine_is_refused_until_registered():
    # DeepSpeed ZeRO replaces each group's tensors by a flat partition after the optimizer is built.
    params = [nn.Parameter(torch.randn(4, 3)), nn.Parameter(torch.randn(5))]
    optimizer = Lamb(params, lr=0.01)
    assert not optimizer.holds_foreign_tensors()
    flat = nn.Parameter(torch.cat([p.detach().reshape(-1) for p in params]))
    flat.grad = torch.randn_like(flat)
    optimizer.param_groups[0]["params"] = [flat]
    assert optimizer.holds_foreign_tensors()
    with pytest.raises(RuntimeError, match="register_zero_partitions"):
        optimizer.step()
    optimizer.register_partition(flat, PartitionLayout((Segment(0, 0, 12), Segment(1, 12, 5)), num_tensors=2))
    optimizer.step()


@pytest.mark.parametrize(
    "segments, message",
    [
        ((Segment(2, 0, 4),), "bad segment"),
        ((Segment(0, 0, 0),), "bad segment"),
        ((Segment(0, 6, 5),), "outside"),
    ],
)
def test_register_partition_rejects_a_layout_that_does_not_fit(segments, message):
    flat = nn.Parameter(torch.zeros(10))
    optimizer = Lamb([nn.Parameter(torch.zeros(1))])
    with pytest.raises(ValueError, match=message):
        optimizer.register_partition(flat, PartitionLayout(segments, num_tensors=2))
