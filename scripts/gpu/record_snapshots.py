"""One program whose device memory PyTorch records, as a user would, into a memory snapshot.

  python3 record_snapshots.py PROGRAM OUT.pickle [--max-entries N]

PROGRAM: train-bert (masked-LM training of a BERT-base sized model, random weights, AdamW, varying
batch and sequence length), generate-gpt2 (greedy generation with a GPT-2 sized model, random
weights, KV cache, varying batch and prompt length), or train-cnn (a small convolutional network,
fp32 then autocast). Nothing here is tuned for vmmkit: they are the plain ways of doing each.
Recording starts before the first CUDA allocation, so the snapshot's segments account for every
byte PyTorch reserved. Prints one line: PROGRAM, max_memory_reserved, max_memory_allocated.
"""
import argparse, random, sys, torch

p = argparse.ArgumentParser()
p.add_argument("program")
p.add_argument("out")
p.add_argument("--max-entries", type=int, default=1_000_000)
a = p.parse_args()
torch.manual_seed(0)
random.seed(0)
torch.cuda.memory._record_memory_history(max_entries=a.max_entries, stacks="python")
dev = "cuda"

if a.program == "train-bert":
    from transformers import BertConfig, BertForMaskedLM
    model = BertForMaskedLM(BertConfig()).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(12):
        batch, seq = random.choice([8, 16, 24]), random.choice([128, 256, 384])
        ids = torch.randint(0, 30000, (batch, seq), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
elif a.program == "generate-gpt2":
    from transformers import GPT2Config, GPT2LMHeadModel
    model = GPT2LMHeadModel(GPT2Config()).to(dev).half().eval()
    with torch.no_grad():
        for i in range(6):
            batch, prompt = random.choice([1, 4, 8]), random.choice([32, 128, 256])
            ids = torch.randint(0, 50000, (batch, prompt), device=dev)
            model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=96, do_sample=False,
                           pad_token_id=0)
elif a.program == "train-cnn":
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(64, 128, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(128, 256, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(256, 100)).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    for step in range(40):
        x = torch.randn(random.choice([64, 128, 256]), 3, 64, 64, device=dev)
        y = torch.randint(0, 100, (x.shape[0],), device=dev)
        with torch.autocast("cuda", dtype=torch.float16, enabled=step >= 20):
            loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
else:
    sys.exit("unknown program " + a.program)

torch.cuda.synchronize()
torch.cuda.memory._dump_snapshot(a.out)
torch.cuda.memory._record_memory_history(enabled=None)
print(f"{a.program} max_memory_reserved {torch.cuda.max_memory_reserved()} "
      f"max_memory_allocated {torch.cuda.max_memory_allocated()}")
