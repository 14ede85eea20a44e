"""Real PyTorch workloads for recording allocation traces and memory snapshots (random weights, no network).

Each workload is an ordinary program nobody tuned for vmmkit: HuggingFace transformers' generate() on
several architectures, a training loop, a diffusion-style U-Net, and encoder inference over varying
shapes. Run it under `vmmkit run --trace FILE` with PYTORCH_NO_CUDA_MEMORY_CACHING=1 to record
vmmkit's trace format, or with --snapshot FILE to write PyTorch's own memory snapshot
(torch.cuda.memory._dump_snapshot) with the caching allocator on.

Usage: python3 workloads.py NAME [--snapshot FILE.pickle] [--max-entries N] [--deterministic]
Prints one JSON line: the workload, its peak figures from torch.cuda (max_memory_allocated,
max_memory_reserved) and a checksum of its outputs.
"""
import argparse
import json
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def causal_lm(arch):
    """A small decoder of ARCH with random weights (on the host, in float32), and its config."""
    import transformers as tf
    if arch == "llama":
        cfg = tf.LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                             num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=4096)
        model = tf.LlamaForCausalLM(cfg)
    elif arch == "gpt2":
        cfg = tf.GPT2Config(vocab_size=50257, n_embd=768, n_layer=12, n_head=12, n_positions=2048)
        model = tf.GPT2LMHeadModel(cfg)
    elif arch == "mistral":  # grouped-query attention with a sliding window: the cache stops growing at 128 tokens
        cfg = tf.MistralConfig(vocab_size=32000, hidden_size=1024, intermediate_size=3584, num_hidden_layers=8,
                               num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=4096,
                               sliding_window=128)
        model = tf.MistralForCausalLM(cfg)
    elif arch == "opt":  # learned positions, every head cached, a ReLU MLP
        cfg = tf.OPTConfig(vocab_size=50272, hidden_size=1024, num_hidden_layers=12, ffn_dim=4096,
                           num_attention_heads=16, max_position_embeddings=2048, word_embed_proj_dim=1024)
        model = tf.OPTForCausalLM(cfg)
    elif arch == "gemma":  # one key-value head of 256 dimensions, a GeGLU MLP, the embeddings scaled
        cfg = tf.GemmaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=4096, num_hidden_layers=8,
                             num_attention_heads=8, num_key_value_heads=1, head_dim=256, max_position_embeddings=4096)
        model = tf.GemmaForCausalLM(cfg)
    elif arch == "phi3":  # one fused q/k/v projection and one fused gate/up projection
        cfg = tf.Phi3Config(vocab_size=32064, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                            num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=4096,
                            pad_token_id=0)
        model = tf.Phi3ForCausalLM(cfg)
    elif arch == "mixtral":  # a mixture of experts: 8 expert MLPs, 2 per token, so each expert's batch varies
        cfg = tf.MixtralConfig(vocab_size=32000, hidden_size=768, intermediate_size=1536, num_hidden_layers=8,
                               num_attention_heads=12, num_key_value_heads=4, num_local_experts=8,
                               num_experts_per_tok=2, max_position_embeddings=4096)
        model = tf.MixtralForCausalLM(cfg)
    elif arch == "qwen2":
        cfg = tf.Qwen2Config(vocab_size=32000, hidden_size=896, intermediate_size=4864, num_hidden_layers=12,
                             num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=4096)
        model = tf.Qwen2ForCausalLM(cfg)
    elif arch == "llama_large":  # a larger model: its weights (1.7 GiB) make each page a smaller share of the peak
        cfg = tf.LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=16,
                             num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=4096)
        model = tf.LlamaForCausalLM(cfg)
    elif arch == "neox":  # rotary embeddings on a quarter of each head, attention and MLP side by side
        cfg = tf.GPTNeoXConfig(vocab_size=50432, hidden_size=1024, num_hidden_layers=12, num_attention_heads=16,
                               intermediate_size=4096, max_position_embeddings=2048)
        model = tf.GPTNeoXForCausalLM(cfg)
    elif arch == "bloom":  # ALiBi: a position bias made for the whole sequence at every step, no rotary cache
        cfg = tf.BloomConfig(vocab_size=50176, hidden_size=1024, n_layer=12, n_head=16)
        model = tf.BloomForCausalLM(cfg)
    elif arch == "mamba":  # a state-space model: fixed-size states per layer, no cache that grows
        cfg = tf.MambaConfig(vocab_size=32000, hidden_size=1024, state_size=16, num_hidden_layers=16, expand=2,
                             conv_kernel=4, pad_token_id=0)
        model = tf.MambaForCausalLM(cfg)
    elif arch == "falcon":  # one key-value head shared by every query head (multi-query attention)
        cfg = tf.FalconConfig(vocab_size=50304, hidden_size=1024, num_hidden_layers=12, num_attention_heads=16,
                              multi_query=True, parallel_attn=True, new_decoder_architecture=False, alibi=False,
                              max_position_embeddings=2048)
        model = tf.FalconForCausalLM(cfg)
    elif arch == "gemma2":  # sliding-window and global attention in turn, soft-capped scores, its own cache layout
        cfg = tf.Gemma2Config(vocab_size=32000, hidden_size=1024, intermediate_size=4096, num_hidden_layers=8,
                              num_attention_heads=8, num_key_value_heads=4, head_dim=128,
                              max_position_embeddings=4096, sliding_window=128)
        model = tf.Gemma2ForCausalLM(cfg)
    else:
        raise SystemExit(f"unknown architecture {arch}")
    return model, cfg


def padded(b, seq, vocab, g, side, low=3):
    """B random sequences of SEQ/2 to SEQ tokens (ids from LOW up), padded with token 0 on SIDE:
    "left" as batched generation takes prompts, "right" as an encoder or a trainer takes them.
    (ids, attention mask) on the host."""
    lengths = torch.randint(seq // 2, seq + 1, (b,), generator=g)
    ids = torch.randint(low, vocab, (b, seq), generator=g)
    mask = torch.ones(b, seq, dtype=torch.long)
    for i, n in enumerate(lengths.tolist()):
        pad = slice(0, seq - n) if side == "left" else slice(n, None)
        mask[i, pad] = 0
        ids[i, pad] = 0
    return ids, mask


def generate_tokens(model, ids, mask, new_tokens, sample=False, beams=1, cache=None):
    """One generate() call of exactly NEW_TOKENS tokens: its output ids on the device."""
    # transformers compiles a static-like cache's decoding step (cache="static", Gemma-2's default)
    # with CUDA graphs, which PyTorch runs only with its caching allocator on: recordings turn it off.
    return model.generate(input_ids=ids.cuda(), attention_mask=mask.cuda(), max_new_tokens=new_tokens,
                          min_new_tokens=new_tokens, pad_token_id=0, num_beams=beams, disable_compile=True,
                          **({"cache_implementation": cache} if cache else {}),
                          **({"do_sample": True, "top_k": 50} if sample else {"do_sample": False}))


def generate(arch, batch, prompt, new_tokens, seed=0, sample=False, beams=1, attention=None, cache=None):
    """transformers' generate() on a small model of ARCH with random weights. attention: the attention
    implementation (None: the library's default, "eager": the probabilities made as a tensor); cache:
    generate()'s cache_implementation (None: the dynamic cache, grown a token a step; "static": one
    buffer per layer for the whole length, written in place)."""
    torch.manual_seed(seed)
    model, cfg = causal_lm(arch)
    if attention:
        model.config._attn_implementation = attention
    model = model.to("cuda", dtype=torch.bfloat16).eval()
    g = torch.Generator().manual_seed(seed)
    total = 0
    with torch.no_grad():
        for b in batch:
            ids, mask = padded(b, prompt, cfg.vocab_size, g, "left")
            total += int(generate_tokens(model, ids, mask, new_tokens, sample, beams, cache).sum().item())
    return total


def serving(calls, seed=0):
    """One process serving requests in turn, with no pool of its own: generate() calls on one
    Llama-style model, each with its own batch, prompt length, number of new tokens and decoding.
    calls: (batch, prompt, new tokens, sampled) per call."""
    torch.manual_seed(seed)
    model, cfg = causal_lm("llama")
    model = model.to("cuda", dtype=torch.bfloat16).eval()
    g = torch.Generator().manual_seed(seed + 10)
    total = 0
    with torch.no_grad():
        for b, prompt, new_tokens, sample in calls:
            ids, mask = padded(b, prompt, cfg.vocab_size, g, "left")
            total += int(generate_tokens(model, ids, mask, new_tokens, sample).sum().item())
    return total


def score_varying(rounds=30, tokens_per_batch=16384):
    """Scoring sequences, as an RL trainer's reference model does: the Llama-style model's forward pass
    over 2-32 sequences of 128-1,024 tokens (at most TOKENS_PER_BATCH in all), its logits made float32
    log-probabilities and each next token's own taken: transients of up to 2 GiB whose size changes
    every round."""
    torch.manual_seed(0)
    model, cfg = causal_lm("llama")
    model = model.to("cuda", dtype=torch.bfloat16).eval()
    g = torch.Generator().manual_seed(6)
    total = 0.0
    with torch.no_grad():
        for _ in range(rounds):
            seq = int(torch.randint(128, 1025, (1,), generator=g))
            b = max(1, min(int(torch.randint(2, 33, (1,), generator=g)), tokens_per_batch // seq))
            ids = torch.randint(3, cfg.vocab_size, (b, seq), generator=g).cuda()
            # The whole float32 log-softmax made as a tensor (not next_token_log_probs' fused
            # cross-entropy): that transient is what this workload's trace records.
            logits = model(input_ids=ids).logits.float()
            log_probs = torch.log_softmax(logits[:, :-1], dim=-1)
            taken = log_probs.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
            total += float(taken.sum().item())
    return total


def next_token_log_probs(model, ids, mask):
    """Each token's log-probability under MODEL given the tokens before it, in float32: (batch, length - 1)."""
    logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
    return -F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1),
                            reduction="none").view(ids.shape[0], -1)


def rl_loop(iterations=4, batch=16, prompt=128, new_tokens=96):
    """RL post-training in one process, as co-located trainers run it: each iteration the policy (a
    Llama-style model, float32 weights, bfloat16 autocast) samples rollouts with generate(), a frozen
    reference model scores them, and the policy takes a step on them (a policy-gradient loss with
    stand-in rewards and a KL penalty to the reference, AdamW). Generation's cache, scoring's
    transients and training's activations take turns beside the optimizer's state."""
    torch.manual_seed(0)
    policy, cfg = causal_lm("llama")
    reference, _ = causal_lm("llama")
    policy = policy.cuda()
    reference = reference.to("cuda", dtype=torch.bfloat16).eval()
    opt = torch.optim.AdamW(policy.parameters(), lr=1e-5)
    g = torch.Generator().manual_seed(12)
    total = 0.0
    for _ in range(iterations):
        ids, mask = padded(batch, prompt, cfg.vocab_size, g, "left")
        policy.eval()
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            rollouts = generate_tokens(policy, ids, mask, new_tokens, sample=True)
        rollout_mask = torch.cat([mask, torch.ones(batch, new_tokens, dtype=torch.long)], dim=1).cuda()
        with torch.no_grad():
            reference_log_probs = next_token_log_probs(reference, rollouts, rollout_mask)
        policy.train()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            log_probs = next_token_log_probs(policy, rollouts, rollout_mask)
        rewards = torch.randn(batch, 1, generator=g).cuda()
        generated = slice(prompt - 1, None)  # the log-probabilities of the sampled tokens
        loss = (-(rewards * log_probs[:, generated]).mean()
                + 0.05 * (log_probs[:, generated] - reference_log_probs[:, generated]).mean())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        total += float(loss.item())
    return total


def train_bert_mlm(steps=40):
    """Masked-language-model training of a BERT-base-style encoder under bfloat16 autocast with dynamic
    padding: each step its own batch (8-32 sequences) and length (64-512 tokens), 15 % of the real
    tokens masked, AdamW."""
    import transformers as tf
    torch.manual_seed(0)
    cfg = tf.BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                        intermediate_size=3072, max_position_embeddings=512)
    model = tf.BertForMaskedLM(cfg).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(8)
    loss_sum = 0.0
    for _ in range(steps):
        b = int(torch.randint(8, 33, (1,), generator=g))
        seq = int(torch.randint(64, 513, (1,), generator=g))
        ids, mask = padded(b, seq, cfg.vocab_size, g, "right", low=1000)
        chosen = (torch.rand(b, seq, generator=g) < 0.15) & (mask == 1)
        labels = ids.masked_fill(~chosen, -100)
        inputs = ids.masked_fill(chosen, 103)  # the mask token
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=inputs.cuda(), attention_mask=mask.cuda(), labels=labels.cuda()).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss_sum += loss.item()
    return loss_sum


def seq2seq(batch, prompt, new_tokens, seed=0, arch="t5"):
    """Encoder-decoder generate(): the cross-attention cache is made once per call, the decoder's
    self-attention cache grows by a token a step. arch: "t5" (relative position buckets) or "bart"
    (learned positions)."""
    import transformers as tf
    torch.manual_seed(seed)
    if arch == "t5":
        cfg = tf.T5Config(vocab_size=32128, d_model=768, d_kv=64, d_ff=2048, num_layers=8, num_decoder_layers=8,
                          num_heads=12, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
        model = tf.T5ForConditionalGeneration(cfg)
    elif arch == "bart":
        cfg = tf.BartConfig(vocab_size=50265, d_model=768, encoder_layers=6, decoder_layers=6,
                            encoder_attention_heads=12, decoder_attention_heads=12, encoder_ffn_dim=3072,
                            decoder_ffn_dim=3072, max_position_embeddings=1024, pad_token_id=0, bos_token_id=1,
                            eos_token_id=2, decoder_start_token_id=2, forced_eos_token_id=None)
        model = tf.BartForConditionalGeneration(cfg)
    else:
        raise SystemExit(f"unknown architecture {arch}")
    model = model.to("cuda", dtype=torch.bfloat16).eval()
    g = torch.Generator().manual_seed(seed)
    total = 0
    with torch.no_grad():
        for b in batch:
            ids, mask = padded(b, prompt, cfg.vocab_size, g, "right", low=2)
            out = model.generate(input_ids=ids.cuda(), attention_mask=mask.cuda(), max_new_tokens=new_tokens,
                                 min_new_tokens=new_tokens, do_sample=False)
            total += int(out.sum().item())
    return total


def transcribe(batch, new_tokens, seed=0):
    """Whisper's generate() (speech to text): log-mel features of 30 s, as its feature extractor pads
    every clip (80 bins of 3,000 frames), a convolutional front end and an encoder over 1,500 positions,
    then a decoder whose cross-attention cache is made once per call and whose self-attention cache
    grows a token a step. A base-sized model (6 + 6 layers of 512), Whisper's own vocabulary."""
    import transformers as tf
    torch.manual_seed(seed)
    cfg = tf.WhisperConfig(vocab_size=51865, num_mel_bins=80, d_model=512, encoder_layers=6, decoder_layers=6,
                           encoder_attention_heads=8, decoder_attention_heads=8, encoder_ffn_dim=2048,
                           decoder_ffn_dim=2048, max_source_positions=1500, max_target_positions=448)
    model = tf.WhisperForConditionalGeneration(cfg).to("cuda", dtype=torch.bfloat16).eval()
    g = torch.Generator().manual_seed(seed)
    total = 0
    with torch.no_grad():
        for b in batch:
            features = torch.randn(b, cfg.num_mel_bins, 2 * cfg.max_source_positions, generator=g)
            out = model.generate(input_features=features.to("cuda", dtype=torch.bfloat16), max_new_tokens=new_tokens,
                                 min_new_tokens=new_tokens, do_sample=False)
            total += int(out.sum().item())
    return total


def assisted(prompts, new_tokens, seed=0):
    """Assisted (speculative) generate(): a two-layer draft model of the same vocabulary proposes tokens
    that the 8-layer Llama-style model checks in one forward pass, and its cache is cut back to the
    tokens kept; batch 1 (what transformers allows), one prompt after another of PROMPTS tokens."""
    import transformers as tf
    torch.manual_seed(seed)
    main_cfg = tf.LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                              num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=4096)
    draft_cfg = tf.LlamaConfig(vocab_size=32000, hidden_size=512, intermediate_size=1408, num_hidden_layers=2,
                               num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=4096)
    model = tf.LlamaForCausalLM(main_cfg).to("cuda", dtype=torch.bfloat16).eval()
    draft = tf.LlamaForCausalLM(draft_cfg).to("cuda", dtype=torch.bfloat16).eval()
    g = torch.Generator().manual_seed(seed)
    total = 0
    with torch.no_grad():
        for prompt in prompts:
            ids = torch.randint(3, main_cfg.vocab_size, (1, prompt), generator=g).cuda()
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), assistant_model=draft,
                                 max_new_tokens=new_tokens, min_new_tokens=new_tokens, pad_token_id=0,
                                 do_sample=False)
            total += int(out.sum().item())
    return total


def compiled_inference(rounds=24):
    """A Llama-style model's forward pass compiled by torch.compile (Inductor, dynamic shapes), over
    batches of 1-16 sequences of 64-512 tokens: the compiled code allocates its own buffers, reusing
    them inside the graph."""
    import transformers as tf
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
                         num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=4096, use_cache=False)
    model = tf.LlamaForCausalLM(cfg).to("cuda", dtype=torch.bfloat16).eval()
    forward = torch.compile(model, dynamic=True)
    g = torch.Generator().manual_seed(6)
    total = 0.0
    with torch.no_grad():
        for _ in range(rounds):
            b = int(torch.randint(1, 17, (1,), generator=g))
            s = int(torch.randint(64, 513, (1,), generator=g))
            ids = torch.randint(3, cfg.vocab_size, (b, s), generator=g).cuda()
            total += float(forward(input_ids=ids, logits_to_keep=1).logits.float().sum().item())
    return total


def train_vit_amp(steps=30):
    """A vision transformer trained in float16 with a gradient scaler and AdamW, over varying batch
    sizes and image sizes (position embeddings interpolated to each size)."""
    import transformers as tf
    torch.manual_seed(0)
    cfg = tf.ViTConfig(image_size=224, patch_size=16, hidden_size=512, num_hidden_layers=8, num_attention_heads=8,
                       intermediate_size=2048, num_labels=100)
    model = tf.ViTForImageClassification(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler("cuda")
    g = torch.Generator().manual_seed(7)
    total = 0.0
    for step in range(steps):
        b = int(torch.randint(8, 49, (1,), generator=g))
        res = (160, 224, 192, 256)[step % 4]
        x = torch.randn(b, 3, res, res, generator=g).cuda()
        labels = torch.randint(0, cfg.num_labels, (b,), generator=g).cuda()
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(pixel_values=x, labels=labels, interpolate_pos_encoding=True).loss
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        total += loss.item()
    return total


def train_clip(steps=30):
    """CLIP-style contrastive training: a ViT image tower and a text tower, the batch's image-text
    similarity matrix and its loss, bf16 autocast and AdamW, over batches of 32-160 pairs."""
    import transformers as tf
    torch.manual_seed(0)
    cfg = tf.CLIPConfig(
        text_config=dict(vocab_size=49408, hidden_size=512, intermediate_size=2048, num_hidden_layers=6,
                         num_attention_heads=8, max_position_embeddings=77),
        vision_config=dict(image_size=160, patch_size=16, hidden_size=512, intermediate_size=2048,
                           num_hidden_layers=8, num_attention_heads=8),
        projection_dim=256)
    model = tf.CLIPModel(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(8)
    total = 0.0
    for step in range(steps):
        b = int(torch.randint(32, 161, (1,), generator=g))
        ids = torch.randint(1, 49407, (b, 77), generator=g).cuda()
        pixels = torch.randn(b, 3, 160, 160, generator=g).cuda()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, pixel_values=pixels, return_loss=True).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        total += loss.item()
    return total


class DiTBlock(nn.Module):
    """A diffusion transformer block: attention and MLP, each scaled and shifted by the timestep."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"), nn.Linear(4 * dim, dim))
        self.ada = nn.Linear(dim, 6 * dim)

    def forward(self, x, c):
        s1, b1, g1, s2, b2, g2 = self.ada(F.silu(c))[:, None].chunk(6, dim=-1)
        h = self.norm1(x) * (1 + s1) + b1
        q, k, v = self.qkv(h).unflatten(-1, (3, self.heads, -1)).permute(2, 0, 3, 1, 4)
        x = x + g1 * self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2))
        return x + g2 * self.mlp(self.norm2(x) * (1 + s2) + b2)


def sample_dit(steps=16):
    """Diffusion-transformer sampling (a DiT-style model, 12 blocks of width 768, 2x2 patches of a
    4-channel latent) at latents of 32, 48 and 64 pixels and batches of 2-8, in half precision."""
    torch.manual_seed(0)
    dim, patch = 768, 2
    blocks = nn.ModuleList(DiTBlock(dim, 12) for _ in range(12))
    embed = nn.Conv2d(4, dim, patch, stride=patch)
    t_embed = nn.Sequential(nn.Linear(256, dim), nn.SiLU(), nn.Linear(dim, dim))
    out = nn.Linear(dim, patch * patch * 4)
    model = nn.ModuleList([blocks, embed, t_embed, out]).cuda().half().eval()
    total = 0.0
    with torch.no_grad():
        for batch, res in ((4, 32), (2, 64), (8, 48), (6, 32), (3, 64)):
            x = torch.randn(batch, 4, res, res, device="cuda", dtype=torch.half)
            side = res // patch
            pos = torch.randn(1, side * side, dim, device="cuda", dtype=torch.half) * 0.02
            for s in range(steps):
                t = torch.full((batch,), 1000.0 * (1 - s / steps), device="cuda")
                freqs = torch.exp(-torch.arange(128, device="cuda") * (9.21 / 128))
                c = t_embed(torch.cat([torch.sin(t[:, None] * freqs), torch.cos(t[:, None] * freqs)], 1).half())
                h = embed(x).flatten(2).transpose(1, 2) + pos
                for blk in blocks:
                    h = blk(h, c)
                eps = out(h).transpose(1, 2).reshape(batch, 4 * patch * patch, side, side)
                eps = F.pixel_shuffle(eps, patch)
                x = x - 0.05 * eps
            total += float(x.float().abs().mean().item())
    return total


def detect_maskrcnn(rounds=16):
    """Instance segmentation (torchvision's Mask R-CNN, ResNet-50 FPN, random weights) over 1-4 images
    of 384-896 pixels a side: how many proposals survive non-maximum suppression, and so how many
    boxes and masks each image makes, varies from image to image."""
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.detection.maskrcnn_resnet50_fpn(
        weights=None, weights_backbone=None, box_score_thresh=0.0).cuda().eval()
    g = torch.Generator().manual_seed(9)
    total = 0.0
    with torch.no_grad():
        for _ in range(rounds):
            n = int(torch.randint(1, 5, (1,), generator=g))
            sides = torch.randint(384, 897, (n, 2), generator=g).tolist()
            images = [torch.rand(3, h, w, generator=g).cuda() for h, w in sides]
            for out in model(images):
                masks = out["masks"]
                total += float(out["boxes"].sum().item()) + len(out["labels"])
                total += float(masks.float().mean().item()) if masks.numel() else 0.0
    return total


def train_lora(steps=40):
    """LoRA fine-tuning (peft) of a Llama-style model held in bfloat16: only the adapters on every
    attention and MLP projection train, over micro-batches of 2-16 sequences of 64-768 tokens."""
    import peft
    import transformers as tf
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                         num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=2048, use_cache=False)
    base = tf.LlamaForCausalLM(cfg).to("cuda", dtype=torch.bfloat16)
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    model = peft.get_peft_model(base, peft.LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules=targets))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    g = torch.Generator().manual_seed(11)
    total = 0.0
    for _ in range(steps):
        b = int(torch.randint(2, 17, (1,), generator=g))
        seq = int(torch.randint(64, 769, (1,), generator=g))
        ids = torch.randint(3, cfg.vocab_size, (b, seq), generator=g).cuda()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        total += loss.item()
    return total


class GraphSage(nn.Module):
    """Three GraphSAGE layers (PyTorch Geometric): each node's features mixed with its neighbours' mean."""

    def __init__(self, features, hidden, classes):
        super().__init__()
        import torch_geometric.nn as gnn
        self.convs = nn.ModuleList([gnn.SAGEConv(features, hidden), gnn.SAGEConv(hidden, hidden),
                                    gnn.SAGEConv(hidden, classes)])

    def forward(self, x, edges):
        for i, conv in enumerate(self.convs):
            x = conv(x, edges)
            if i < len(self.convs) - 1:
                x = F.relu(x)
        return x


def train_gnn(steps=30):
    """Graph learning: GraphSAGE trained full-batch on a new random graph every step, 20,000-120,000
    nodes with ten edges each, so each step's gathers and scatters have sizes of their own."""
    torch.manual_seed(0)
    model = GraphSage(128, 256, 16).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(12)
    total = 0.0
    for _ in range(steps):
        n = int(torch.randint(20_000, 120_001, (1,), generator=g))
        x = torch.randn(n, 128, generator=g).cuda()
        edges = torch.randint(0, n, (2, n * 10), generator=g).cuda()
        labels = torch.randint(0, 16, (n,), generator=g).cuda()
        loss = F.cross_entropy(model(x, edges), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        total += loss.item()
    return total


class Recommender(nn.Module):
    """DLRM's shape: dense features through a bottom MLP, sparse features as sums of embedding rows
    (one table each, gradients sparse), every pair of the two kinds' vectors dotted, a top MLP over
    the dot products and the dense vector."""

    def __init__(self, table_rows, dim=64, dense_features=13):
        super().__init__()
        self.tables = nn.ModuleList([nn.EmbeddingBag(n, dim, mode="sum", sparse=True, device="cuda")
                                     for n in table_rows])
        self.bottom = nn.Sequential(nn.Linear(dense_features, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                                    nn.Linear(256, dim), nn.ReLU())
        pairs = (len(table_rows) + 1) * len(table_rows) // 2
        self.top = nn.Sequential(nn.Linear(dim + pairs, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                                 nn.Linear(256, 1))

    def forward(self, dense, bags):
        x = self.bottom(dense)
        vectors = torch.stack([x] + [t(ids, offsets) for t, (ids, offsets) in zip(self.tables, bags)], dim=1)
        dots = torch.bmm(vectors, vectors.transpose(1, 2))
        i, j = torch.triu_indices(vectors.shape[1], vectors.shape[1], offset=1, device=dots.device)
        return self.top(torch.cat([x, dots[:, i, j]], dim=1)).squeeze(1)


def train_dlrm(steps=60, batch=4096, eval_every=20, eval_batch=16384):
    """A recommender's training: eight embedding tables of 50,000 to 4 million rows (2.3 GiB, and as much
    again twice over for SparseAdam's moments), each sample looking up a bag of 1-20 ids per table drawn
    with a skew (popular rows often), so each step's sparse gradients (one row per id looked up) have
    sizes of their own; the dense layers trained with Adam; an evaluation pass on a larger batch every
    EVAL_EVERY steps."""
    torch.manual_seed(0)
    rows = [4_000_000, 2_000_000, 1_000_000, 1_000_000, 500_000, 250_000, 100_000, 50_000]
    model = Recommender(rows).cuda()
    sparse = torch.optim.SparseAdam(list(model.tables.parameters()), lr=1e-3)
    dense = torch.optim.Adam(list(model.bottom.parameters()) + list(model.top.parameters()), lr=1e-3)
    g = torch.Generator().manual_seed(14)

    def draw(b):
        bags = []
        for n in rows:
            lengths = torch.randint(1, 21, (b,), generator=g)
            offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]])
            ids = (torch.rand(int(lengths.sum()), generator=g) ** 3 * n).long()
            bags.append((ids.cuda(), offsets.cuda()))
        return torch.randn(b, 13, generator=g).cuda(), bags, torch.randint(0, 2, (b,), generator=g).float().cuda()

    total = 0.0
    for step in range(1, steps + 1):
        x, bags, y = draw(batch)
        loss = F.binary_cross_entropy_with_logits(model(x, bags), y)
        loss.backward()
        sparse.step()
        dense.step()
        sparse.zero_grad(set_to_none=True)
        dense.zero_grad(set_to_none=True)
        total += loss.item()
        if step % eval_every == 0:
            with torch.no_grad():
                x, bags, y = draw(eval_batch)
                total += float(F.binary_cross_entropy_with_logits(model(x, bags), y).item())
    return total


def train_lstm(steps=40):
    """A two-layer LSTM language model (cuDNN) trained on packed batches of 8-64 sequences of 16-400
    tokens: cuDNN's workspace and reserve space change with every batch's shape."""
    torch.manual_seed(0)
    vocab = 16000
    embed = nn.Embedding(vocab, 512)
    lstm = nn.LSTM(512, 1024, num_layers=2, batch_first=True, dropout=0.1)
    head = nn.Linear(1024, vocab)
    model = nn.ModuleList([embed, lstm, head]).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(13)
    total = 0.0
    for _ in range(steps):
        b = int(torch.randint(8, 65, (1,), generator=g))
        lengths = torch.randint(16, 401, (b,), generator=g)
        longest = int(lengths.max())
        ids = torch.randint(0, vocab, (b, longest), generator=g)
        past_end = torch.arange(longest - 1)[None] >= (lengths[:, None] - 1)
        targets = ids[:, 1:].masked_fill(past_end, -100).cuda()
        packed = nn.utils.rnn.pack_padded_sequence(embed(ids.cuda()), lengths, batch_first=True, enforce_sorted=False)
        out, _ = nn.utils.rnn.pad_packed_sequence(lstm(packed)[0], batch_first=True)
        loss = F.cross_entropy(head(out[:, :-1]).flatten(0, 1), targets.flatten(), ignore_index=-100)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        total += loss.item()
    return total


def train_convnext(steps=30):
    """A ConvNeXt (timm's convnext_tiny, random weights) trained under bfloat16 autocast on channels-last
    batches of 16-64 images of 128-256 pixels, with AdamW."""
    import timm
    torch.manual_seed(0)
    model = timm.create_model("convnext_tiny", pretrained=False, num_classes=100).cuda()
    model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(14)
    total = 0.0
    for step in range(steps):
        b = int(torch.randint(16, 65, (1,), generator=g))
        res = (128, 192, 256, 160)[step % 4]
        x = torch.randn(b, 3, res, res, generator=g).cuda().to(memory_format=torch.channels_last)
        labels = torch.randint(0, 100, (b,), generator=g).cuda()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        total += loss.item()
    return total


def train_llama_varlen(steps=40, accumulate=2, checkpointing=False):
    """Fine-tuning with dynamic padding: every micro-batch has its own batch size and length, gradients
    are accumulated over two of them and clipped before AdamW steps. checkpointing: each layer's
    activations are made again in the backward pass instead of kept."""
    import transformers as tf
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=8,
                         num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=2048)
    model = tf.LlamaForCausalLM(cfg).cuda()
    if checkpointing:
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
    return train_padded_batches(model, cfg.vocab_size, steps, (4, 16), (64, 512), seed=4, accumulate=accumulate)


def train_padded_batches(model, vocab, steps, batch_sizes, lengths, seed, accumulate=1):
    """Trains a causal language model with dynamic padding: every micro-batch a random size and length
    (each from BATCH_SIZES and LENGTHS, inclusive ranges), under bfloat16 autocast; gradients are
    accumulated over ACCUMULATE micro-batches and clipped before each AdamW step. The sum of the losses."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(seed)
    loss_sum = 0.0
    for step in range(steps):
        b = int(torch.randint(batch_sizes[0], batch_sizes[1] + 1, (1,), generator=g))
        seq = int(torch.randint(lengths[0], lengths[1] + 1, (1,), generator=g))
        ids, mask = padded(b, seq, vocab, g, "right")
        labels = ids.masked_fill(mask == 0, -100)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids.cuda(), attention_mask=mask.cuda(), labels=labels.cuda()).loss / accumulate
        loss.backward()
        if (step + 1) % accumulate == 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
        loss_sum += loss.item()
    return loss_sum


def train_gpt(steps=30, compiled=False):
    """GPT-2 trained with AdamW under bf16 autocast, sequences of four lengths in turn. compiled: the
    model compiled by torch.compile (Inductor, dynamic shapes), so the forward and backward passes are
    fused kernels whose generated code allocates and frees its own buffers."""
    import transformers as tf
    torch.manual_seed(0)
    cfg = tf.GPT2Config(vocab_size=16000, n_embd=512, n_layer=6, n_head=8, n_positions=512)
    model = tf.GPT2LMHeadModel(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    forward = torch.compile(model, dynamic=True) if compiled else model
    g = torch.Generator().manual_seed(1)
    loss_sum = 0.0
    for step in range(steps):
        seq = [128, 256, 192, 384][step % 4]
        x = torch.randint(0, cfg.vocab_size, (8, seq), generator=g).cuda()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = forward(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss_sum += loss.item()
    return loss_sum


def train_moe(steps=30):
    """Mixture-of-experts training (a Mixtral-style decoder: 8 expert MLPs, 2 per token) under bfloat16
    autocast, micro-batches of varying size and length: every step each expert gets its own number of
    tokens, so its activations and their gradients take a new size at every layer and step."""
    import transformers as tf
    torch.manual_seed(0)
    cfg = tf.MixtralConfig(vocab_size=32000, hidden_size=768, intermediate_size=1536, num_hidden_layers=8,
                           num_attention_heads=12, num_key_value_heads=4, num_local_experts=8,
                           num_experts_per_tok=2, max_position_embeddings=2048, output_router_logits=True,
                           router_aux_loss_coef=0.01)
    model = tf.MixtralForCausalLM(cfg).cuda()
    return train_padded_batches(model, cfg.vocab_size, steps, (4, 12), (96, 384), seed=6)


def train_t5(steps=30):
    """Sequence-to-sequence fine-tuning (a T5-style encoder-decoder) with dynamic padding: each step its
    own batch size, source length and target length; AdamW under bfloat16 autocast."""
    import transformers as tf
    torch.manual_seed(0)
    cfg = tf.T5Config(vocab_size=32128, d_model=768, d_kv=64, d_ff=2048, num_layers=8, num_decoder_layers=8,
                      num_heads=12, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    model = tf.T5ForConditionalGeneration(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(7)
    loss_sum = 0.0
    for step in range(steps):
        b = int(torch.randint(4, 25, (1,), generator=g))
        src = int(torch.randint(64, 513, (1,), generator=g))
        tgt = int(torch.randint(16, 129, (1,), generator=g))
        ids, mask = padded(b, src, cfg.vocab_size, g, "right", low=2)
        target, target_mask = padded(b, tgt, cfg.vocab_size, g, "right", low=2)
        labels = target.masked_fill(target_mask == 0, -100)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids.cuda(), attention_mask=mask.cuda(), labels=labels.cuda()).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss_sum += loss.item()
    return loss_sum


def train_ctc(steps=30):
    """Speech recognition training (a wav2vec 2.0-style model with a CTC head) on raw audio of varying
    length: each step 2-12 clips of 2-16 s at 16 kHz, padded to the longest, and transcripts of their
    own lengths; a convolutional feature encoder over the waveform, then a transformer, under bfloat16
    autocast."""
    import transformers as tf
    torch.manual_seed(0)
    cfg = tf.Wav2Vec2Config(vocab_size=32, hidden_size=768, num_hidden_layers=8, num_attention_heads=12,
                            intermediate_size=3072, pad_token_id=0, ctc_loss_reduction="mean",
                            mask_time_prob=0.0)
    model = tf.Wav2Vec2ForCTC(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(9)
    loss_sum = 0.0
    for step in range(steps):
        b = int(torch.randint(2, 13, (1,), generator=g))
        lengths = torch.randint(2 * 16000, 16 * 16000 + 1, (b,), generator=g)
        longest = int(lengths.max())
        audio = torch.randn(b, longest, generator=g)
        mask = (torch.arange(longest)[None, :] < lengths[:, None]).long()
        audio = audio * mask
        words = torch.randint(10, 120, (b,), generator=g)
        labels = torch.randint(1, cfg.vocab_size, (b, int(words.max())), generator=g)
        labels = labels.masked_fill(torch.arange(labels.shape[1])[None, :] >= words[:, None], -100)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_values=audio.cuda(), attention_mask=mask.cuda(), labels=labels.cuda()).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss_sum += loss.item()
    return loss_sum


class ImageDecoder(nn.Module):
    """A latent-to-image decoder in the shape of a diffusion model's VAE decoder: residual blocks at
    four widths, each level upsampled 2x, so the last level's activations are the largest tensors."""

    def __init__(self, widths=(512, 512, 256, 128)):
        super().__init__()
        self.inp = nn.Conv2d(4, widths[0], 3, padding=1)
        self.levels = nn.ModuleList()
        c = widths[0]
        for i, w in enumerate(widths):
            self.levels.append(nn.ModuleList([UNet.res(c, w), UNet.res(w, w),
                                              nn.Upsample(scale_factor=2) if i < len(widths) - 1 else nn.Identity()]))
            c = w
        self.out = nn.Sequential(nn.GroupNorm(8, c), nn.SiLU(), nn.Conv2d(c, 3, 3, padding=1))

    def forward(self, z):
        h = self.inp(z)
        for widen, block, up in self.levels:
            h = widen(h)
            h = up(h + block(h))
        return self.out(h)


def decode_images(rounds=40):
    """Latents decoded to images as a text-to-image server does: each round 1-4 latents of a new
    resolution (32-96 per side, images of 256-768 pixels), in half precision; the activations of the
    full-resolution level are hundreds of MiB and change size every round."""
    torch.manual_seed(0)
    model = ImageDecoder().cuda().half().eval()
    g = torch.Generator().manual_seed(8)
    total = 0.0
    with torch.no_grad():
        for r in range(rounds):
            b = int(torch.randint(1, 5, (1,), generator=g))
            side = 8 * int(torch.randint(4, 13, (1,), generator=g))
            aspect = 8 * int(torch.randint(4, 13, (1,), generator=g))
            z = torch.randn(b, 4, side, aspect, generator=g).cuda().half()
            total += float(model(z).float().abs().mean().item())
    return total


class UNet(nn.Module):
    def __init__(self, ch=64, mults=(1, 2, 4, 4)):
        super().__init__()
        self.inp = nn.Conv2d(4, ch, 3, padding=1)
        self.t_emb = nn.Sequential(nn.Linear(128, ch * 4), nn.SiLU(), nn.Linear(ch * 4, ch * 4))
        self.down, self.up = nn.ModuleList(), nn.ModuleList()
        chans, c = [ch], ch
        for i, m in enumerate(mults):
            blk = nn.ModuleList([self.res(c, ch * m), nn.Conv2d(ch * m, ch * m, 3, stride=2, padding=1) if i < len(mults) - 1 else nn.Identity()])
            self.down.append(blk)
            c = ch * m
            chans.append(c)
        self.mid = self.res(c, c)
        for i, m in reversed(list(enumerate(mults))):
            skip = chans.pop()
            blk = nn.ModuleList([self.res(c + skip, ch * m), nn.Upsample(scale_factor=2) if i > 0 else nn.Identity()])
            self.up.append(blk)
            c = ch * m
        self.out = nn.Conv2d(c, 4, 3, padding=1)

    @staticmethod
    def res(cin, cout):
        return nn.Sequential(nn.GroupNorm(8, cin), nn.SiLU(), nn.Conv2d(cin, cout, 3, padding=1),
                             nn.GroupNorm(8, cout), nn.SiLU(), nn.Conv2d(cout, cout, 3, padding=1))

    def forward(self, x, t):
        half = 64
        freqs = torch.exp(-torch.arange(half, device=x.device) * (9.21 / half))
        angles = t[:, None].float() * freqs
        emb = self.t_emb(torch.cat([torch.sin(angles), torch.cos(angles)], dim=1).to(x.dtype))
        h = self.inp(x) + emb[:, : self.inp.out_channels, None, None]
        skips = [h]
        for res, down in self.down:
            h = res(h)
            skips.append(h)
            h = down(h)
        h = self.mid(h)
        for res, up in self.up:
            s = skips.pop()
            if s.shape[-1] != h.shape[-1]:
                h = F.interpolate(h, size=s.shape[-2:])
            h = up(res(torch.cat([h, s], dim=1)))
        return self.out(h)


def unet_sample(steps=20):
    torch.manual_seed(0)
    model = UNet().cuda().half().eval()
    total = 0.0
    with torch.no_grad():
        for batch, res in ((4, 64), (2, 96), (8, 64), (1, 128)):
            x = torch.randn(batch, 4, res, res, device="cuda", dtype=torch.half)
            for s in range(steps):
                t = torch.full((batch,), 1000.0 * (1 - s / steps), device="cuda", dtype=torch.half)
                eps = model(x, t)
                x = x - 0.05 * eps
            total += float(x.float().abs().mean().item())
    return total


def unet_train(steps=25):
    torch.manual_seed(0)
    model = UNet(ch=48).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    total = 0.0
    for s in range(steps):
        res = (64, 96, 80)[s % 3]
        x = torch.randn(6, 4, res, res, device="cuda")
        t = torch.rand(6, device="cuda") * 1000
        noise = torch.randn_like(x)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.mse_loss(model(x + noise, t).float(), noise)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        total += loss.item()
    return total


def encoder_varying(rounds=120):
    import transformers as tf
    torch.manual_seed(0)
    cfg = tf.BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                        intermediate_size=3072, max_position_embeddings=512)
    model = tf.BertModel(cfg).cuda().half().eval()
    g = torch.Generator().manual_seed(2)
    total = 0.0
    with torch.no_grad():
        for r in range(rounds):
            b = int(torch.randint(1, 33, (1,), generator=g))
            s = int(torch.randint(16, 513, (1,), generator=g))
            ids = torch.randint(0, cfg.vocab_size, (b, s), generator=g).cuda()
            total += float(model(input_ids=ids).last_hidden_state[:, 0].float().sum().item())
    return total


def image_rounds(rounds, seed, sizes, classify):
    """Inference over varying shapes: each round a batch of 1-64 random images (on the host) at the
    next of SIZES pixels, given to CLASSIFY, which returns a float; the sum of what it returned."""
    g = torch.Generator().manual_seed(seed)
    total = 0.0
    for r in range(rounds):
        b = int(torch.randint(1, 65, (1,), generator=g))
        res = sizes[r % len(sizes)]
        total += classify(torch.randn(b, 3, res, res, generator=g))
    return total


def vision_varying(rounds=60):
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.resnet50().cuda().eval().to(memory_format=torch.channels_last)
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        return image_rounds(rounds, 3, [160, 224, 256, 288], lambda x: float(
            model(x.cuda().to(memory_format=torch.channels_last)).float().sum().item()))


def vit_varying(rounds=60):
    """A vision transformer's inference over varying batch sizes and image sizes (its position
    embeddings interpolated to each size), in half precision."""
    import transformers as tf
    torch.manual_seed(0)
    cfg = tf.ViTConfig(image_size=224, patch_size=16, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                       intermediate_size=3072, num_labels=1000)
    model = tf.ViTForImageClassification(cfg).cuda().half().eval()
    with torch.no_grad():
        return image_rounds(rounds, 5, [160, 224, 256, 320], lambda x: float(
            model(pixel_values=x.cuda().half(), interpolate_pos_encoding=True).logits.float().sum().item()))


def busy_frees(steps=6, spin_cycles=800_000_000):
    """Frees while the device is busy: each step queues a spin kernel (torch.cuda._sleep, about 0.4 s on
    an H200), frees a 1 GiB tensor behind it and asks for 768 MiB at once, then waits for the device and
    allocates 1 GiB again. With PyTorch's cache off each free is a cudaFree: natively it waits for the
    spin; under vmmkit the 768 MiB request passes the budget, waits for the free's memory at most its
    bound, and gives up with the device still busy (a trace marks it wait_gave_up)."""
    x = torch.ones(256 << 20, device="cuda")
    total = torch.zeros((), device="cuda")
    for step in range(steps):
        torch.cuda._sleep(spin_cycles)
        del x
        y = torch.full((192 << 20,), float(step), device="cuda")
        torch.cuda.synchronize()
        x = torch.ones(256 << 20, device="cuda")
        total += y[-1] + x[0]
        del y
    return float(total.item())


WORKLOADS = {
    "busy_frees": busy_frees,
    "gen_llama_b1": lambda: generate("llama", [1, 1], 64, 128),
    "gen_llama_b8": lambda: generate("llama", [8, 4], 128, 96),
    "gen_llama_long": lambda: generate("llama", [4], 1024, 128),
    "gen_gpt2_b4": lambda: generate("gpt2", [4, 2], 96, 96),
    "gen_qwen2_b16": lambda: generate("qwen2", [16], 256, 96),
    # Large batches (the synthetic generation_b32 and generation_b48 shapes): the cache's copies pass
    # the allocator's small-request limit early in decoding.
    "gen_llama_b32": lambda: generate("llama", [32, 24], 64, 200),
    "gen_llama_b48": lambda: generate("llama", [48, 32], 64, 200),
    # The same class on the other architectures and at the synthetic family's other batch sizes.
    "gen_llama_b24": lambda: generate("llama", [24, 16], 96, 300),
    "gen_llama_b64": lambda: generate("llama", [64], 64, 160),
    "gen_qwen2_b32": lambda: generate("qwen2", [32, 24], 64, 200),
    "gen_gpt2_b32": lambda: generate("gpt2", [32, 16], 64, 200),
    # Shapes no rule was measured on before they were recorded: three calls of falling batch, and
    # sampling (top-k) at a batch between the others.
    "gen_llama_b40": lambda: generate("llama", [40, 32, 24], 64, 240),
    "gen_qwen2_b48_sampled": lambda: generate("qwen2", [48], 96, 200, sample=True),
    # Two architectures no rule was measured on: a sliding-window cache (its copies stop growing once
    # the window is full) and OPT.
    "gen_mistral_b32_window": lambda: generate("mistral", [32, 16], 64, 240),
    "gen_opt_b24": lambda: generate("opt", [24, 16], 96, 200),
    # Longer runs of the Llama class, recorded after every rule: about 640k operations and a peak
    # near 560 MiB at batch 32 (350 tokens), a smaller batch with a longer prompt, and a batch between.
    "gen_llama_b32_long": lambda: generate("llama", [32, 24], 64, 350),
    "gen_llama_b16_long": lambda: generate("llama", [16, 12], 128, 400),
    "gen_llama_b28": lambda: generate("llama", [28, 20], 64, 260),
    # Two more architectures, recorded after every rule: Gemma-style and Phi-3-style.
    "gen_gemma_b32": lambda: generate("gemma", [32, 24], 64, 160),
    "gen_phi3_b32": lambda: generate("phi3", [32, 24], 64, 160),
    # Four kinds of program no rule was measured on, recorded after every rule: beam search (the cache
    # reordered every step), a mixture of experts, an encoder-decoder, and fine-tuning with dynamic
    # padding.
    "gen_llama_beam4": lambda: generate("llama", [8, 6], 64, 160, beams=4),
    "gen_mixtral_b16": lambda: generate("mixtral", [16, 12], 64, 160),
    "gen_t5_b32": lambda: seq2seq([32, 24], 96, 120),
    "train_llama_varlen": train_llama_varlen,
    # Three more kinds, recorded after every rule: a static cache (one buffer per layer for the whole
    # length, written in place), eager attention (the attention probabilities made as tensors, a
    # transient that grows with the sequence), and fine-tuning with gradient checkpointing.
    "gen_llama_b32_static": lambda: generate("llama", [32, 24], 64, 200, cache="static"),
    "gen_llama_b24_eager": lambda: generate("llama", [24, 16], 96, 200, attention="eager"),
    "train_llama_checkpointed": lambda: train_llama_varlen(checkpointing=True),
    # Six more kinds, recorded after every rule: three architectures of their own (GPT-NeoX, ALiBi in
    # BLOOM, multi-query attention in Falcon), an encoder-decoder with learned positions (BART), a
    # larger Llama-style model, and a vision transformer over varying shapes.
    "gen_neox_b32": lambda: generate("neox", [32, 24], 64, 160),
    "gen_bloom_b24": lambda: generate("bloom", [24, 16], 64, 160),
    "gen_falcon_b32": lambda: generate("falcon", [32, 24], 64, 160),
    "gen_bart_b32": lambda: seq2seq([32, 24], 96, 120, arch="bart"),
    "gen_llama_large_b16": lambda: generate("llama_large", [16, 12], 128, 200),
    "vit_varying": vit_varying,
    # Five more kinds, recorded after every rule: speculative decoding (a draft model's cache beside the
    # model's, both cut back to the tokens kept), a state-space model (Mamba: fixed-size states, no
    # growing cache), long prompts (3,072 tokens: the prefill is the peak), a forward pass compiled by
    # torch.compile (Inductor's own buffers), and float16 training with a gradient scaler.
    "gen_llama_assisted": lambda: assisted([64, 256, 128, 512], 160),
    "gen_mamba_b32": lambda: generate("mamba", [32, 24], 64, 160),
    "gen_llama_prompt3k": lambda: generate("llama", [4, 2], 3072, 64),
    "infer_llama_compiled": compiled_inference,
    "train_vit_amp": train_vit_amp,
    # Two more, recorded after the oversized-handle rule: contrastive image-text training (CLIP) and
    # diffusion-transformer sampling at varying resolutions.
    "train_clip": train_clip,
    "sample_dit": sample_dit,
    # Five kinds beyond transformers' language and vision models: detection with data-dependent
    # shapes, adapter fine-tuning, graph learning, a recurrent network on cuDNN, a convolutional
    # network from timm.
    "detect_maskrcnn": detect_maskrcnn,
    "train_lora": train_lora,
    "train_gnn": train_gnn,
    "train_lstm": train_lstm,
    "train_convnext": train_convnext,
    # Four more kinds, recorded after every rule: a process serving generate() calls in turn (each its
    # own batch, prompt, length and decoding), scoring sequences' log-probabilities (an RL trainer's
    # reference model: float32 transients of up to 2 GiB, a new size every round), Gemma-2's cache
    # (sliding-window and global layers in turn), and masked-language-model training with dynamic padding.
    "gen_llama_serving": lambda: serving([(12, 128, 96, False), (40, 64, 128, True), (4, 512, 48, False),
                                          (28, 96, 128, False), (1, 1024, 64, True), (20, 256, 96, False),
                                          (48, 64, 80, True), (8, 160, 128, False)]),
    "score_llama_varying": score_varying,
    "gen_gemma2_b24": lambda: generate("gemma2", [24, 16], 64, 200),
    "train_bert_mlm": train_bert_mlm,
    # Recorded after the four above: generation, scoring and training taking turns in one process.
    "rl_loop": rl_loop,
    # Three more kinds, recorded after every rule: speech to text (Whisper's generate()), a recommender
    # (large embedding tables, sparse gradients of a new size every step) and training compiled by
    # torch.compile.
    "gen_whisper_b16": lambda: transcribe([16, 8], 120),
    "train_dlrm": train_dlrm,
    "train_gpt2_compiled": lambda: train_gpt(30, compiled=True),
    # Three more kinds, recorded after every rule: a mixture of experts in training (each expert's
    # share of the tokens, and so its tensors, a new size every step), sequence-to-sequence training
    # with dynamic padding, and images decoded from latents at a new resolution every round.
    "train_moe": train_moe,
    "train_t5": train_t5,
    "decode_images": decode_images,
    # And two more: speech recognition trained on raw audio of varying length (CTC), and generation
    # at a batch larger than any recorded before (96, then 64).
    "train_ctc": train_ctc,
    "gen_llama_b96": lambda: generate("llama", [96, 64], 64, 160),
    "train_gpt2": train_gpt,
    "unet_sample": unet_sample,
    "unet_train": unet_train,
    "bert_varying": encoder_varying,
    "resnet_varying": vision_varying,
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("name", choices=sorted(WORKLOADS))
    p.add_argument("--snapshot", help="record PyTorch's memory history and dump the snapshot here")
    p.add_argument("--max-entries", type=int, default=2_000_000)
    p.add_argument("--deterministic", action="store_true",
                   help="deterministic algorithms only, so that two runs' checksums must agree")
    a = p.parse_args()
    if a.deterministic:
        __import__("os").environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
    torch.cuda.init()
    if a.snapshot:
        torch.cuda.memory._record_memory_history(enabled="all", stacks="python", max_entries=a.max_entries)
    start = time.perf_counter()
    checksum = WORKLOADS[a.name]()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    if a.snapshot:
        torch.cuda.memory._dump_snapshot(a.snapshot)
        torch.cuda.memory._record_memory_history(enabled=None)
    print(json.dumps({"workload": a.name, "seconds": round(seconds, 3), "checksum": checksum,
                      "max_memory_allocated": torch.cuda.max_memory_allocated(),
                      "max_memory_reserved": torch.cuda.max_memory_reserved(),
                      "snapshot": a.snapshot, "max_entries": a.max_entries if a.snapshot else None,
                      "alloc_conf": __import__("os").environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}), flush=True)


if __name__ == "__main__":
    main()
