/*
 * The last prompt whose keys and values are still in the context's memory, with the logits that
 * followed it: a request with the same prompt (a retry, a benchmark, a client that asks again)
 * decodes nothing before its first token. Only an identical prompt is reused, so every request's
 * tokens are exactly those of a fresh context; reusing a shared prefix would change the arithmetic
 * (a batch of n tokens and n single tokens round differently) and so, rarely, the tokens.
 */
#ifndef LLAMA_ENGINE_PROMPT_CACHE_H
#define LLAMA_ENGINE_PROMPT_CACHE_H

#include "llama.h"

/* The logits after the prompt's last token, valid until the next decode or prompt_start: the kept
 * ones when the prompt is the kept one (the tokens generated after it are dropped from the memory),
 * else those of a decode of the whole prompt into an emptied memory. NULL when the decode failed. */
const float* prompt_start(struct llama_context* context, llama_token* tokens, int count, int vocab_size);

/* Drops the kept prompt: after a failed decode, whose effect on the memory is unknown. */
void prompt_cache_forget(void);

/* Frees what prompt_start kept (at shutdown). */
void prompt_cache_free(void);

#endif
