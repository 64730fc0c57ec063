"""strata <-> Hugging Face transformers, both ways, for GPT-2, LLaMA and Mixtral (run by run_interop.sh
in the venv of scripts/setup_peer_venv.sh: PyPI's torch and transformers).

usage: hf_interop.py STRATA_HF_INTEROP WORKDIR

(a) strata exports a model (strata_hf_interop export); transformers' from_pretrained loads it
    and its logits on strata's tokens must match the logits strata wrote.
(b) transformers makes a small random model and save_pretrained()s it (also sharded: an index and
    several shards); strata imports it (strata_hf_interop logits) and its logits must match
    transformers'.
(c) models strata cannot represent (a GPT-2 with its own head, GPT-2 attention scaled otherwise)
    are refused, the message naming the config field.
Relative error: max |strata - hf| / max |hf| over all logits, below 1e-4 (float32).
"""
import os
import subprocess
import sys

import torch
from safetensors.torch import load_file, save_file
from transformers import (GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, MixtralConfig,
                          MixtralForCausalLM)
from transformers.utils import logging as hf_logging

TOLERANCE = 1e-4
MODELS = {"gpt2": GPT2LMHeadModel, "llama": LlamaForCausalLM, "mixtral": MixtralForCausalLM}


def relative_error(ours, ref):
    return ((ours - ref).abs().max() / ref.abs().max()).item()


def hf_logits(model, tokens):
    with torch.no_grad():
        return model(input_ids=tokens).logits


def run_strata(program, mode, family, directory):
    done = subprocess.run([program, mode, family, directory], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{program} {mode} {family} {directory} failed ({done.returncode}):\n{done.stderr}")
    return load_file(os.path.join(directory, "strata_logits.safetensors"))


def strata_exports(program, work, family):
    directory = os.path.join(work, "strata_" + family)
    os.makedirs(directory)
    ours = run_strata(program, "export", family, directory)
    # mixtral_bf16: bfloat16 parameters, exported exactly as float32; both compute in float32.
    model = MODELS[family.split("_")[0]].from_pretrained(directory).float().eval()
    return relative_error(ours["logits"], hf_logits(model, ours["tokens"]))


# The GPT-2 variants of (c): config.json fields strata refuses, each by name.
REFUSED_GPT2 = {
    "gpt2_untied": {"tie_word_embeddings": False},
    "gpt2_layer_scaled": {"scale_attn_by_inverse_layer_idx": True},
    "gpt2_unscaled": {"scale_attn_weights": False},
}


def random_hf_model(case):
    torch.manual_seed(11)
    if case.startswith("gpt2"):
        config = GPT2Config(vocab_size=60, n_positions=20, n_embd=48, n_layer=2, n_head=4,
                            **REFUSED_GPT2.get(case, {}))
        family = "gpt2"
    elif case.startswith("mixtral"):
        config = MixtralConfig(vocab_size=60, max_position_embeddings=20, hidden_size=48, intermediate_size=40,
                               num_hidden_layers=2, num_attention_heads=6, num_key_value_heads=2, rms_norm_eps=1e-5,
                               rope_theta=5000.0, num_local_experts=4, num_experts_per_tok=2)
        family = "mixtral"
    else:
        config = LlamaConfig(vocab_size=60, max_position_embeddings=20, hidden_size=48, intermediate_size=72,
                             num_hidden_layers=2, num_attention_heads=6, num_key_value_heads=2, rms_norm_eps=1e-5,
                             rope_theta=5000.0, tie_word_embeddings=case.startswith("llama_tied"))
        family = "llama"
    model = MODELS[family](config).eval()
    with torch.no_grad():  # norms start at 1 and biases at 0: move them so that they count
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model, family


def strata_imports(program, work, case):
    model, family = random_hf_model(case)
    directory = os.path.join(work, "hf_" + case)
    if case.endswith("_bf16"):  # a 16-bit file: strata converts it, transformers computes in float32 here too
        model.to(torch.bfloat16).save_pretrained(directory)
        model = MODELS[family].from_pretrained(directory).float().eval()
    elif case.endswith("_sharded"):  # about 0.3 MB of weights: several shards and an index
        model.save_pretrained(directory, max_shard_size="100KB")
        shards = [f for f in os.listdir(directory) if f.endswith(".safetensors")]
        if "model.safetensors.index.json" not in os.listdir(directory) or len(shards) < 2:
            sys.exit(f"{case}: save_pretrained wrote no sharded layout: {sorted(os.listdir(directory))}")
    else:
        model.save_pretrained(directory)
    tokens = torch.randint(0, model.config.vocab_size, (2, 20), generator=torch.Generator().manual_seed(4))
    save_file({"tokens": tokens}, os.path.join(directory, "tokens.safetensors"))
    ours = run_strata(program, "logits", family, directory)
    return relative_error(ours["logits"], hf_logits(model, tokens))


def strata_refuses(program, work, case):
    """The refusal names the config field; returns its message (empty when strata accepted)."""
    model, family = random_hf_model(case)
    directory = os.path.join(work, "hf_" + case)
    model.save_pretrained(directory)
    save_file({"tokens": torch.zeros(1, 4, dtype=torch.int64)}, os.path.join(directory, "tokens.safetensors"))
    done = subprocess.run([program, "logits", family, directory], capture_output=True, text=True)
    field = next(iter(REFUSED_GPT2[case]))
    return done.stderr.strip() if done.returncode != 0 and field in done.stderr else ""


def main():
    program, work = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    hf_logging.set_verbosity_error()  # e.g. GPT2Config's default bos/eos 50256 beyond a small vocabulary
    hf_logging.disable_progress_bar()
    results = [(f"strata -> transformers {f}", strata_exports(program, work, f)) for f in ("gpt2", "llama", "mixtral", "mixtral_bf16")]
    results += [(f"transformers -> strata {c}", strata_imports(program, work, c))
                for c in ("gpt2", "llama", "llama_tied", "llama_bf16", "gpt2_sharded", "llama_sharded",
                          "llama_tied_sharded", "mixtral", "mixtral_bf16")]
    failed = 0
    for name, err in results:
        ok = err < TOLERANCE
        failed += not ok
        print(f"{name:40s} logits relative error {err:.2e} {'ok' if ok else 'FAILED (limit %.0e)' % TOLERANCE}")
    for case in REFUSED_GPT2:
        message = strata_refuses(program, work, case)
        failed += not message
        print(f"{'transformers -> strata ' + case:40s} {'refused: ' + message if message else 'FAILED: not refused'}")
    total = len(results) + len(REFUSED_GPT2)
    print(f"{total - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
