"""Prints the PyTorch reference values hard-coded in tests/unit/optim/test_optim.cpp.

Run with the PyTorch 1.13 interpreter: /usr/bin/python3 tests/reference/optim_reference.py
Parameters and gradients are fixed small inputs that the C++ test rebuilds bit for bit.
"""
import torch

P0 = [0.1, -0.2, 0.3, -0.4, 0.5, -0.6]  # shape [2, 3]
P1 = [0.05, -0.15, 0.25]                # shape [3]


def grad_value(param, i, step):
    # Exactly representable arithmetic on both sides: a small integer times 0.037.
    return ((i * 7 + step * 3 + param * 5) % 11 - 5) * 0.037


def make_params(dtype):
    p0 = torch.tensor(P0, dtype=dtype).reshape(2, 3).requires_grad_()
    p1 = torch.tensor(P1, dtype=dtype).requires_grad_()
    return [p0, p1]


def run(name, make_opt, dtype=torch.float64, steps=3, skip=None, state_of=None):
    params = make_params(dtype)
    opt = make_opt(params)
    for k in range(steps):
        opt.zero_grad(set_to_none=True)
        for j, p in enumerate(params):
            if skip is not None and (j, k) in skip:
                continue  # this parameter gets no gradient in this step
            g = [grad_value(j, i, k) for i in range(p.numel())]
            p.grad = torch.tensor(g, dtype=dtype).reshape(p.shape)
        opt.step()
    values = [v for p in params for v in p.detach().reshape(-1).tolist()]
    print(f"// {name}")
    print("{" + ", ".join(repr(v) for v in values) + "}")
    if state_of is not None:
        st = opt.state[params[state_of[0]]]
        for key in state_of[1]:
            print(f"//   state {key}: " + "{" + ", ".join(repr(v) for v in st[key].reshape(-1).tolist()) + "}")


torch.set_printoptions(precision=17)
run("SGD(lr=0.1)", lambda ps: torch.optim.SGD(ps, lr=0.1))
run("SGD(lr=0.1, momentum=0.9, dampening=0.1)",
    lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.1), state_of=(1, ["momentum_buffer"]))
run("SGD(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)",
    lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01))
run("SGD(lr=0.1, weight_decay=0.1)", lambda ps: torch.optim.SGD(ps, lr=0.1, weight_decay=0.1))
run("Adam(lr=0.01, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1)",
    lambda ps: torch.optim.Adam(ps, lr=0.01, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1),
    state_of=(1, ["exp_avg", "exp_avg_sq"]))
run("AdamW(lr=0.01, weight_decay=0.1)", lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1))
run("AdamW(lr=0.01, weight_decay=0.1) float32", lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1),
    dtype=torch.float32)
run("AdamW([{params: [p0], lr: 0.01, weight_decay: 0.1}, {params: [p1], lr: 0.05, weight_decay: 0.0}])",
    lambda ps: torch.optim.AdamW([{"params": [ps[0]], "lr": 0.01, "weight_decay": 0.1},
                                  {"params": [ps[1]], "lr": 0.05, "weight_decay": 0.0}]))
run("Adam(lr=0.01), p1 has no grad in step 0, p0 none in step 2",
    lambda ps: torch.optim.Adam(ps, lr=0.01), skip={(1, 0), (0, 2)})
run("SGD(lr=0.1, momentum=0.9), p1 has no grad in step 0",
    lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9), skip={(1, 0)})

# clip_grad_norm_ on the step-0 gradients of p0 and p1.
params = make_params(torch.float64)
for j, p in enumerate(params):
    p.grad = torch.tensor([grad_value(j, i, 0) for i in range(p.numel())], dtype=torch.float64).reshape(p.shape)
norm = torch.nn.utils.clip_grad_norm_(params, max_norm=0.1)
print("// clip_grad_norm_(max_norm=0.1): norm", repr(norm.item()))
print("{" + ", ".join(repr(v) for p in params for v in p.grad.reshape(-1).tolist()) + "}")
