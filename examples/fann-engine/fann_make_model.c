/*
 * Makes a tiny character-level model for fann_engine: trains a FANN network (27 inputs, 27 outputs,
 * one-hot over " abcdefghijklmnopqrstuvwxyz") to predict each character's successor in TEXT, and
 * saves it with fann_save().
 *   fann_make_model OUT.net "the text to learn"
 * The text should give every character one successor (e.g. "abcdefghijklmnopqrstuvwxyz ").
 */
#include <floatfann.h>
#include <stdio.h>
#include <string.h>

#define VOCAB 27

static const char symbols[VOCAB + 1] = " abcdefghijklmnopqrstuvwxyz";

static int symbol_index(char c) {
    const char* at = strchr(symbols + 1, c);
    return c && at ? (int)(at - symbols) : 0;
}

int main(int argc, char** argv) {
    if (argc != 3 || strlen(argv[2]) < 2) {
        fprintf(stderr, "usage: fann_make_model OUT.net TEXT\n");
        return 2;
    }
    const char* text = argv[2];
    unsigned int pairs = (unsigned int)strlen(text);  /* the text wraps around */
    struct fann_train_data* data = fann_create_train(pairs, VOCAB, VOCAB);
    for (unsigned int i = 0; i < pairs; i++) {
        memset(data->input[i], 0, VOCAB * sizeof(fann_type));
        memset(data->output[i], 0, VOCAB * sizeof(fann_type));
        data->input[i][symbol_index(text[i])] = 1;
        data->output[i][symbol_index(text[(i + 1) % pairs])] = 1;
    }
    struct fann* net = fann_create_standard(3, VOCAB, 32, VOCAB);
    fann_set_activation_function_hidden(net, FANN_SIGMOID_SYMMETRIC);
    fann_set_activation_function_output(net, FANN_SIGMOID);
    fann_train_on_data(net, data, 2000, 0, 0.0005f);
    float mse = fann_test_data(net, data);
    int saved = fann_save(net, argv[1]);
    printf("trained on %u pairs, mse %.6f, saved %s\n", pairs, mse, argv[1]);
    fann_destroy_train(data);
    fann_destroy(net);
    return saved == 0 ? 0 : 1;
}
