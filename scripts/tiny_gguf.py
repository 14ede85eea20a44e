"""Writes a llama-architecture GGUF model with generated weights and a small SentencePiece-style
vocabulary, through llama.cpp's own gguf writer (gguf-py, on PYTHONPATH). No download: the weights
come from a seeded generator, so the same arguments give the same file. scripts/tiny-gguf.sh runs it."""
import argparse
import itertools
import string

import numpy as np
import gguf


# ChatML, as chat models publish it in tokenizer_config.json; llama.cpp knows it by "<|im_start|>".
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
CHATML_TOKENS = ["<|im_start|>", "<|im_end|>"]


def vocabulary(size, special=()):
    """<unk> <s> </s>, the 256 byte-fallback tokens, word pieces ('▁a', 'a', '▁ab', ...), then the
    special tokens given, in the last ids (so the other ids stay those of a vocabulary without them)."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [gguf.TokenType.BYTE] * 256
    size -= len(special)
    alphabet = string.ascii_lowercase + string.digits + ".,!?'"
    pieces = ["▁"]
    for length in itertools.count(1):
        for letters in itertools.product(alphabet, repeat=length):
            word = "".join(letters)
            pieces += ["▁" + word, word]
            if len(tokens) + len(pieces) >= size:
                break
        if len(tokens) + len(pieces) >= size:
            break
    pieces = pieces[: size - len(tokens)]
    # SentencePiece merges the pair whose piece scores highest first: longer pieces win.
    scores = [0.0] * len(tokens) + [float(len(p)) for p in pieces]
    tokens += pieces + list(special)
    types += [gguf.TokenType.NORMAL] * len(pieces) + [gguf.TokenType.CONTROL] * len(special)
    scores += [0.0] * len(special)
    return tokens, scores, types


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out")
    parser.add_argument("--embd", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--ff", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=512)
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--type", choices=["f32", "f16"], default="f32")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--chat-template", metavar="chatml|TEXT",
                        help="tokenizer.chat_template: chatml (ChatML, with <|im_start|> and <|im_end|> as the "
                             "vocabulary's last two tokens), or this text as it is")
    args = parser.parse_args()
    if args.embd % args.heads or args.heads % args.kv_heads or args.vocab < 300:
        parser.error("embd must divide by heads, heads by kv-heads; vocab at least 300")

    dtype = np.float16 if args.type == "f16" else np.float32
    rng = np.random.default_rng(args.seed)
    writer = gguf.GGUFWriter(args.out, "llama")
    writer.add_name("vmmkit tiny llama")
    writer.add_context_length(args.context)
    writer.add_embedding_length(args.embd)
    writer.add_block_count(args.layers)
    writer.add_feed_forward_length(args.ff)
    writer.add_head_count(args.heads)
    writer.add_head_count_kv(args.kv_heads)
    writer.add_rope_dimension_count(args.embd // args.heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if args.type == "f16" else gguf.LlamaFileType.ALL_F32)

    chatml = args.chat_template == "chatml"
    tokens, scores, types = vocabulary(args.vocab, CHATML_TOKENS if chatml else ())
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    if args.chat_template is not None:
        writer.add_chat_template(CHATML if chatml else args.chat_template)

    def weight(rows, columns, scale=1.0):
        # numpy's (rows, columns) is ggml's [columns, rows]: rows outputs, each over columns inputs.
        return (rng.standard_normal((rows, columns), dtype=np.float32) * (scale / np.sqrt(columns))).astype(dtype)

    kv = args.embd // args.heads * args.kv_heads
    ones = np.ones(args.embd, dtype=np.float32)
    writer.add_tensor("token_embd.weight", weight(args.vocab, args.embd, np.sqrt(args.embd)))
    for layer in range(args.layers):
        blk = f"blk.{layer}."
        writer.add_tensor(blk + "attn_norm.weight", ones)
        writer.add_tensor(blk + "attn_q.weight", weight(args.embd, args.embd))
        writer.add_tensor(blk + "attn_k.weight", weight(kv, args.embd))
        writer.add_tensor(blk + "attn_v.weight", weight(kv, args.embd))
        writer.add_tensor(blk + "attn_output.weight", weight(args.embd, args.embd))
        writer.add_tensor(blk + "ffn_norm.weight", ones)
        writer.add_tensor(blk + "ffn_gate.weight", weight(args.ff, args.embd))
        writer.add_tensor(blk + "ffn_up.weight", weight(args.ff, args.embd))
        writer.add_tensor(blk + "ffn_down.weight", weight(args.embd, args.ff))
    writer.add_tensor("output_norm.weight", ones)
    writer.add_tensor("output.weight", weight(args.vocab, args.embd, 4.0))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main()
