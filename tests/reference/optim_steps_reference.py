"""PyTorch side of test_optim_reference (run under /usr/bin/python3 with torch 1.13).

Reads parameters and per-step gradients written by strata (float32 and float64 copies,
suffixed .f32 / .f64; a missing "g.<step>.<param>" entry means that parameter has no
gradient in that step) and writes the parameters after the last step, for:
  sgd_nesterov  torch.optim.SGD(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)
  lion          Lion (Chen et al. 2023), written out below from the paper's update rule
  adafactor_*   Adafactor (Shazeer & Stern 2018) as Hugging Face transformers defines its
                options, written out below from those definitions (transformers is not
                installed here, and its code is not copied)
and the learning rate of each step under torch's schedulers (StepLR, OneCycleLR, LinearLR,
ConstantLR, CosineAnnealingLR chained with SequentialLR), written as "sched.<name>".
"""
import math
import sys

import torch

from safetensors_numpy import read_safetensors, write_safetensors

NUM_STEPS = 5
NUM_PARAMS = 3


def grads_of(t, sfx):
    """grads[k][j]: the gradient of parameter j in step k, or None."""
    return [[t.get(f"g.{k}.{j}{sfx}") for j in range(NUM_PARAMS)] for k in range(NUM_STEPS)]


def params_of(t, sfx):
    return [t[f"p.{j}{sfx}"].clone() for j in range(NUM_PARAMS)]


def run_torch_sgd(params, grads):
    ps = [p.clone().requires_grad_() for p in params]
    opt = torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)
    for step in grads:
        for p, g in zip(ps, step):
            p.grad = None if g is None else g.clone()
        opt.step()
    return [p.detach() for p in ps]


def run_lion(params, grads, lr, beta1, beta2, weight_decay):
    """Lion: p *= 1 - lr wd; p -= lr sign(beta1 m + (1 - beta1) g); m = beta2 m + (1 - beta2) g."""
    ps = [p.clone() for p in params]
    exp_avg = [None] * len(ps)
    for step in grads:
        for j, g in enumerate(step):
            if g is None:
                continue
            if exp_avg[j] is None:
                exp_avg[j] = torch.zeros_like(ps[j])
            m = exp_avg[j]
            ps[j] = ps[j] * (1 - lr * weight_decay)
            direction = torch.sign(m * beta1 + g * (1 - beta1))
            ps[j] = ps[j] + direction * (-lr)
            exp_avg[j] = m * beta2 + g * (1 - beta2)
    return ps


def rms(t):
    return (t.norm(2) / math.sqrt(t.numel())).item()


def run_adafactor(params, grads, lr=None, eps=(1e-30, 1e-3), clip_threshold=1.0, decay_rate=-0.8, beta1=None,
                  weight_decay=0.0, scale_parameter=True, relative_step=True, warmup_init=False):
    """Adafactor from its definition (factored second moments over the last two dims)."""
    ps = [p.clone() for p in params]
    state = [None] * len(ps)
    for step in grads:
        for j, g in enumerate(step):
            if g is None:
                continue
            p = ps[j]
            factored = p.dim() >= 2
            if state[j] is None:
                st = {"step": 0}
                if factored:
                    st["row"] = torch.zeros(p.shape[:-1], dtype=p.dtype)
                    st["col"] = torch.zeros(p.shape[:-2] + p.shape[-1:], dtype=p.dtype)
                else:
                    st["v"] = torch.zeros_like(p)
                if beta1 is not None:
                    st["m"] = torch.zeros_like(p)
                state[j] = st
            st = state[j]
            st["step"] += 1
            t = st["step"]
            size = lr
            if relative_step:
                size = min(1e-6 * t if warmup_init else 1e-2, 1.0 / math.sqrt(t))
            if scale_parameter:
                size = size * max(eps[1], rms(p))
            beta2t = 1.0 - t ** decay_rate
            u = g * g + eps[0]
            if factored:
                st["row"] = st["row"] * beta2t + u.mean(dim=-1) * (1.0 - beta2t)
                st["col"] = st["col"] * beta2t + u.mean(dim=-2) * (1.0 - beta2t)
                r = (st["row"] / st["row"].mean(dim=-1, keepdim=True)).rsqrt().unsqueeze(-1)
                c = st["col"].unsqueeze(-2).rsqrt()
                u = r * c * g
            else:
                st["v"] = st["v"] * beta2t + u * (1.0 - beta2t)
                u = st["v"].rsqrt() * g
            u = u / max(1.0, rms(u) / clip_threshold) * size
            if beta1 is not None:
                st["m"] = st["m"] * beta1 + u * (1.0 - beta1)
                u = st["m"]
            if weight_decay != 0.0:
                p = p + p * (-weight_decay * size)
            ps[j] = p - u
    return ps, state


def scheduled_lrs(make, steps, lr=0.5):
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=lr)
    sched = make(opt)
    lrs = []
    for _ in range(steps):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return torch.tensor(lrs, dtype=torch.float64)


def schedules():
    S = torch.optim.lr_scheduler
    W, T = 5, 30

    def warmup(o):
        return S.LinearLR(o, start_factor=1.0 / W, end_factor=1.0, total_iters=W - 1)

    def then(first, second, milestone):
        return lambda o: S.SequentialLR(o, [first(o), second(o)], milestones=[milestone])

    out = {
        "warmup_linear": scheduled_lrs(
            then(warmup, lambda o: S.LinearLR(o, start_factor=1.0, end_factor=0.1, total_iters=T - W), W), 40),
        "warmup_cosine": scheduled_lrs(
            then(warmup, lambda o: S.CosineAnnealingLR(o, T_max=T - W, eta_min=0.1 * 0.5), W), T + 1),
        "warmup_constant": scheduled_lrs(then(warmup, lambda o: S.ConstantLR(o, factor=1.0, total_iters=0), W), 40),
        "step": scheduled_lrs(lambda o: S.StepLR(o, step_size=7, gamma=0.3), 40),
        "one_cycle": scheduled_lrs(lambda o: S.OneCycleLR(o, max_lr=0.5, total_steps=40, cycle_momentum=False), 40),
        "one_cycle_linear_three_phase": scheduled_lrs(
            lambda o: S.OneCycleLR(o, max_lr=0.5, total_steps=40, pct_start=0.25, anneal_strategy="linear",
                                   three_phase=True, div_factor=10.0, final_div_factor=100.0,
                                   cycle_momentum=False), 40),
    }
    # Warmup-stable-decay: warm-up to step W, constant, then the last D = 10 of 40 steps decay.
    D, TW = 10, 40
    for name, decay in (("wsd_linear", lambda o: S.LinearLR(o, start_factor=1.0, end_factor=0.0, total_iters=D)),
                        ("wsd_cosine", lambda o: S.CosineAnnealingLR(o, T_max=D, eta_min=0.0))):
        out[name] = scheduled_lrs(
            lambda o, decay=decay: S.SequentialLR(
                o, [warmup(o), S.ConstantLR(o, factor=1.0, total_iters=0), decay(o)], milestones=[W, TW - D]),
            TW + 1)
    return {"sched." + k: v for k, v in out.items()}


ADAFACTOR_CONFIGS = {
    "adafactor_default": {},
    "adafactor_lr_beta1": {"lr": 0.01, "relative_step": False, "scale_parameter": False, "beta1": 0.9,
                           "weight_decay": 0.01, "clip_threshold": 0.5},
    "adafactor_warmup_init": {"warmup_init": True, "weight_decay": 0.1},
}


def main():
    t, _ = read_safetensors(sys.argv[1])
    out = {}
    for sfx in (".f32", ".f64"):
        params, grads = params_of(t, sfx), grads_of(t, sfx)
        results = {"sgd_nesterov": run_torch_sgd(params, grads),
                   "lion": run_lion(params, grads, lr=0.01, beta1=0.9, beta2=0.99, weight_decay=0.1)}
        for name, config in ADAFACTOR_CONFIGS.items():
            results[name], state = run_adafactor(params, grads, **config)
            if name == "adafactor_default":
                out["adafactor_default.row.0" + sfx] = state[0]["row"]
                out["adafactor_default.col.0" + sfx] = state[0]["col"]
        for name, ps in results.items():
            for j, p in enumerate(ps):
                out[f"{name}.{j}{sfx}"] = p
    out.update(schedules())
    write_safetensors(sys.argv[2], out)


if __name__ == "__main__":
    main()
