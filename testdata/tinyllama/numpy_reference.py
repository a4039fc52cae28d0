#!/usr/bin/python3
"""An independent float64 reference of the tiny models of every family, in numpy.

It rebuilds each model from SPEC.md alone (the weights from the seed, the graph of its
config.json's family) and runs the prompts of the golden file golden_tiny_<family>.json:
the logits at every checked position and the greedy continuation. It writes
numpy_<family>.json beside this file; TestNumpyReference (internal/tinyllama) checks the
Go reference's goldens against them without running Python.

Usage (Debian's python3-numpy; the python3 first on PATH may lack numpy):
    /usr/bin/python3 testdata/tinyllama/numpy_reference.py [family ...]
Families: public (Llama 3.2), qwen2, qwen3, phi3, granite, falcon3.
"""
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
FAMILIES = ["public", "qwen2", "qwen3", "phi3", "granite", "falcon3"]
M64 = (1 << 64) - 1


def fnv1a64(name):
    h = 0xCBF29CE484222325
    for b in name.encode():
        h = ((h ^ b) * 0x100000001B3) & M64
    return h


def draws(seed, name, n):
    """SPEC step 2-3: the first n SplitMix64 draws of a tensor, as m in [-1024, 1023]."""
    with np.errstate(over="ignore"):
        start = np.uint64((seed ^ fnv1a64(name)) & M64)
        z = start + np.arange(1, n + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(53)).astype(np.int64) - 1024


def tensor(c, name, shape):
    m = draws(c["init_seed"], name, int(np.prod(shape))).astype(np.float64)
    if name == "model.embed_tokens.weight":
        w = m * 2.0**-14
    elif name == "model.norm.weight":
        w = 16 * (1 + np.floor(m / 4) * 2.0**-10)
    elif name.endswith("norm.weight"):
        w = 1 + np.floor(m / 4) * 2.0**-10
    elif name.endswith(".bias"):
        w = m * 2.0**-12
    else:  # projections and an untied lm_head: 2^-(9+s), 4^s >= in_features
        s = 0
        while 4**s < shape[-1]:
            s += 1
        w = m * 2.0 ** -(9 + s)
    return w.reshape(shape)


def inv_freq(c, n):
    """RoPE's frequencies for a sequence of n tokens, and the factor on cos and sin."""
    hd, theta = c["head_dim"], c["rope_theta"]
    inv = 1.0 / theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
    rs = c.get("rope_scaling")
    if rs and rs.get("rope_type") == "longrope":
        # SPEC.md, phi3: short factors within the original context, long beyond; cos and sin
        # times sqrt(1 + ln(factor)/ln(original)), factor = max_position_embeddings / original
        orig = c["original_max_position_embeddings"]
        ext = np.asarray(rs["short_factor"] if n <= orig else rs["long_factor"], dtype=np.float64)
        factor = c["max_position_embeddings"] / orig
        return inv / ext, math.sqrt(1 + math.log(factor) / math.log(orig))
    if not rs or rs.get("rope_type") != "llama3":
        return inv, 1.0
    # transformers' _compute_llama3_parameters
    factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    orig = rs["original_max_position_embeddings"]
    low_wave, high_wave = orig / lo, orig / hi
    wave = 2 * math.pi / inv
    out = np.where(wave > low_wave, inv / factor, inv)
    smooth = (orig / wave - lo) / (hi - lo)
    mid = (wave >= high_wave) & (wave <= low_wave)
    return np.where(mid, (1 - smooth) * inv / factor + smooth * inv, out), 1.0


class Model:
    def __init__(self, c):
        self.c = c
        H, hd = c["hidden_size"], c["head_dim"]
        nh, nkv, F, V = c["num_attention_heads"], c["num_key_value_heads"], c["intermediate_size"], c["vocab_size"]
        self.embed = tensor(c, "model.embed_tokens.weight", (V, H))
        self.lm = self.embed if c.get("tie_word_embeddings", True) else tensor(c, "lm_head.weight", (V, H))
        self.norm = tensor(c, "model.norm.weight", (H,))
        granite = c.get("model_type") == "granite"
        self.emb = c["embedding_multiplier"] if granite else 1.0
        self.res = c["residual_multiplier"] if granite else 1.0
        self.scale = c["attention_multiplier"] if granite else 1 / math.sqrt(hd)
        self.logit_div = c["logits_scaling"] if granite else 1.0
        self.layers = []
        for i in range(c["num_hidden_layers"]):
            p = f"model.layers.{i}."
            L = {
                "in": tensor(c, p + "input_layernorm.weight", (H,)),
                "post": tensor(c, p + "post_attention_layernorm.weight", (H,)),
                "o": tensor(c, p + "self_attn.o_proj.weight", (H, nh * hd)),
                "down": tensor(c, p + "mlp.down_proj.weight", (H, F)),
            }
            if c.get("model_type") == "phi3":
                # SPEC.md, phi3: one fused tensor each, generated whole, split by rows
                qkv = tensor(c, p + "self_attn.qkv_proj.weight", ((nh + 2 * nkv) * hd, H))
                L["q"], L["k"], L["v"] = np.split(qkv, [nh * hd, (nh + nkv) * hd])
                L["gate"], L["up"] = np.split(tensor(c, p + "mlp.gate_up_proj.weight", (2 * F, H)), [F])
            else:
                for key, name, rows in [("q", "self_attn.q_proj", nh * hd), ("k", "self_attn.k_proj", nkv * hd),
                                        ("v", "self_attn.v_proj", nkv * hd), ("gate", "mlp.gate_proj", F),
                                        ("up", "mlp.up_proj", F)]:
                    L[key] = tensor(c, p + name + ".weight", (rows, H))
            if c.get("attention_bias"):
                L["qb"] = tensor(c, p + "self_attn.q_proj.bias", (nh * hd,))
                L["kb"] = tensor(c, p + "self_attn.k_proj.bias", (nkv * hd,))
                L["vb"] = tensor(c, p + "self_attn.v_proj.bias", (nkv * hd,))
            if c.get("model_type") == "qwen3":
                L["qn"] = tensor(c, p + "self_attn.q_norm.weight", (hd,))
                L["kn"] = tensor(c, p + "self_attn.k_norm.weight", (hd,))
            self.layers.append(L)

    def rms(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.c["rms_norm_eps"]) * w

    def run(self, tokens):
        """The final normed hidden states of tokens at positions 0..n-1 (causal), [n, H]."""
        c = self.c
        hd, nh, nkv = c["head_dim"], c["num_attention_heads"], c["num_key_value_heads"]
        n = len(tokens)
        x = self.embed[np.asarray(tokens)] * self.emb
        inv, af = inv_freq(c, n)
        ang = np.arange(n, dtype=np.float64)[:, None] * inv[None, :]
        cos, sin = np.cos(ang)[:, None, :] * af, np.sin(ang)[:, None, :] * af

        def rope(t):  # [n, heads, hd], rotate-half
            a, b = t[..., : hd // 2], t[..., hd // 2 :]
            return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)

        causal = np.triu(np.full((n, n), -np.inf), 1)
        for L in self.layers:
            h = self.rms(x, L["in"])
            q, k, v = h @ L["q"].T, h @ L["k"].T, h @ L["v"].T
            if "qb" in L:
                q, k, v = q + L["qb"], k + L["kb"], v + L["vb"]
            q, k, v = q.reshape(n, nh, hd), k.reshape(n, nkv, hd), v.reshape(n, nkv, hd)
            if "qn" in L:
                q, k = self.rms(q, L["qn"]), self.rms(k, L["kn"])
            q, k = rope(q), rope(k)
            g = nh // nkv
            k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
            s = np.einsum("ihd,jhd->hij", q, k) * self.scale + causal
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
            att = np.einsum("hij,jhd->ihd", s, v).reshape(n, nh * hd)
            x = x + (att @ L["o"].T) * self.res
            h = self.rms(x, L["post"])
            gt = h @ L["gate"].T
            x = x + ((gt / (1 + np.exp(-gt)) * (h @ L["up"].T)) @ L["down"].T) * self.res
        return self.rms(x, self.norm)

    def logits(self, h):
        return (h @ self.lm.T) / self.logit_div


def run_case(m, case):
    prompt = case["prompt_ids"]
    out = {"name": case["name"], "checks": [], "greedy": []}
    want = {ch["pos"] for ch in case["checks"]}
    h = m.run(prompt)
    for pos in sorted(want):
        lg = m.logits(h[pos])
        top = np.argsort(-lg, kind="stable")[:20]
        mx = lg.max()
        out["checks"].append({"pos": pos, "top": [[int(i), float(lg[i])] for i in top],
                              "logsumexp": float(mx + np.log(np.exp(lg - mx).sum()))})
    toks = list(prompt)
    for _ in range(len(case["greedy"])):
        # the whole sequence again each step: no KV cache to share a bug with the Go reference
        t = int(np.argmax(m.logits(m.run(toks)[-1])))
        out["greedy"].append(t)
        toks.append(t)
    return out


def main(families):
    for fam in families:
        g = json.load(open(os.path.join(HERE, f"golden_tiny_{fam}.json")))
        m = Model(g["config"])
        doc = {"family": fam, "generated_with": f"testdata/tinyllama/numpy_reference.py, numpy {np.__version__}, float64",
               "cases": [run_case(m, c) for c in g["cases"]]}
        with open(os.path.join(HERE, f"numpy_{fam}.json"), "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        print(f"numpy_{fam}.json: {sum(len(c['greedy']) for c in doc['cases'])} greedy tokens", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:] or FAMILIES)
