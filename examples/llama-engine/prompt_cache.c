#include "prompt_cache.h"

#include <stdlib.h>
#include <string.h>

static llama_token* kept_tokens;
static int kept_count;         /* 0: nothing kept */
static int kept_capacity;
static float* kept_logits;
static int kept_vocab;

static int same_prompt(const llama_token* tokens, int count, int vocab_size) {
    return kept_count == count && kept_vocab == vocab_size && memcmp(kept_tokens, tokens, (size_t)count * sizeof *tokens) == 0;
}

/* Keeps the prompt and its logits; on no memory, keeps nothing (the next request decodes again). */
static void keep(const llama_token* tokens, int count, const float* logits, int vocab_size) {
    if (count > kept_capacity) {
        llama_token* grown = realloc(kept_tokens, (size_t)count * sizeof *grown);
        if (!grown) return;
        kept_tokens = grown;
        kept_capacity = count;
    }
    if (vocab_size != kept_vocab) {
        float* grown = realloc(kept_logits, (size_t)vocab_size * sizeof *grown);
        if (!grown) return;
        kept_logits = grown;
        kept_vocab = vocab_size;
    }
    memcpy(kept_tokens, tokens, (size_t)count * sizeof *tokens);
    memcpy(kept_logits, logits, (size_t)vocab_size * sizeof *logits);
    kept_count = count;
}

const float* prompt_start(struct llama_context* context, llama_token* tokens, int count, int vocab_size) {
    llama_memory_t memory = llama_get_memory(context);
    /* Positions from count on hold the last request's generated tokens; a memory that cannot drop
     * part of a sequence (a recurrent model's) answers false and the prompt is decoded again. */
    if (same_prompt(tokens, count, vocab_size) && llama_memory_seq_rm(memory, 0, count, -1)) return kept_logits;
    kept_count = 0;
    llama_memory_clear(memory, true);
    if (llama_decode(context, llama_batch_get_one(tokens, count)) != 0) return NULL;
    const float* logits = llama_get_logits_ith(context, -1);   /* waits for the device */
    if (logits) keep(tokens, count, logits, vocab_size);
    return logits;
}

void prompt_cache_forget(void) {
    kept_count = 0;
}

void prompt_cache_free(void) {
    free(kept_tokens);
    free(kept_logits);
    kept_tokens = NULL;
    kept_logits = NULL;
    kept_count = kept_capacity = kept_vocab = 0;
}
