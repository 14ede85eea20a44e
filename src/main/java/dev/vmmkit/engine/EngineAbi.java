package dev.vmmkit.engine;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;
import java.lang.invoke.VarHandle;

import static java.lang.foreign.MemoryLayout.PathElement.groupElement;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The C ABI of {@code include/vmmkit/engine_api.h}, versions 1 and 2, as FFM layouts and function
 * descriptors (LP64 Linux: size_t and pointers are 8 bytes).
 */
final class EngineAbi {
    /** The newest ABI version this host implements ({@code ENGINE_ABI_VERSION}). */
    static final int VERSION = 2;
    /** Version 1: engine_generate returns every token at once. */
    static final int VERSION_BLOCKING = 1;

    static boolean supported(int version) {
        return version == VERSION_BLOCKING || version == VERSION;
    }

    static final String GET_INFO = "engine_get_info";
    static final String INIT = "engine_init";
    static final String LOAD_MODEL = "engine_load_model";
    static final String GENERATE = "engine_generate";
    static final String SHUTDOWN = "engine_shutdown";
    static final String GENERATE_STREAM = "engine_generate_stream";
    /** Version 2, optional: the model's chat template applied to a chat. */
    static final String APPLY_CHAT_TEMPLATE = "engine_apply_chat_template";
    /** engine_apply_chat_template's answer when the model has no template the engine can apply. */
    static final long CHAT_TEMPLATE_NONE = -1;

    static final int FINISH_LENGTH = 0;
    static final int FINISH_STOP = 1;
    static final int FINISH_CANCELLED = 2;
    static final int FINISH_ERROR = 3;

    static final StructLayout ENGINE_INFO = MemoryLayout.structLayout(
            JAVA_INT.withName("abi_version"), MemoryLayout.paddingLayout(4),
            ADDRESS.withName("engine_id"), ADDRESS.withName("version"));

    static final StructLayout ENGINE_CONFIG = MemoryLayout.structLayout(
            ADDRESS.withName("ctx"), JAVA_INT.withName("device"), MemoryLayout.paddingLayout(4),
            ADDRESS.withName("options_json"), ADDRESS.withName("alloc_device"),
            ADDRESS.withName("free_device"), ADDRESS.withName("log"));

    static final StructLayout TOKEN_RESULT = MemoryLayout.structLayout(
            JAVA_INT.withName("token_id"), MemoryLayout.paddingLayout(4),
            ADDRESS.withName("logprobs"), JAVA_LONG.withName("logprobs_len"));

    static final StructLayout ENGINE_TOKEN = MemoryLayout.structLayout(
            JAVA_INT.withName("token_id"), MemoryLayout.paddingLayout(4),
            ADDRESS.withName("text"), JAVA_LONG.withName("text_len"),
            JAVA_FLOAT.withName("logprob"), MemoryLayout.paddingLayout(4),
            ADDRESS.withName("top_ids"), ADDRESS.withName("top_logprobs"), JAVA_LONG.withName("top_len"));

    static final StructLayout GENERATE_RESULT = MemoryLayout.structLayout(
            JAVA_INT.withName("finish_reason"), JAVA_INT.withName("prompt_tokens"));

    static final StructLayout CHAT_MESSAGE = MemoryLayout.structLayout(
            ADDRESS.withName("role"), ADDRESS.withName("content"));

    static final VarHandle INFO_ABI = field(ENGINE_INFO, "abi_version");
    static final VarHandle INFO_ID = field(ENGINE_INFO, "engine_id");
    static final VarHandle INFO_VERSION = field(ENGINE_INFO, "version");
    static final VarHandle CONFIG_CTX = field(ENGINE_CONFIG, "ctx");
    static final VarHandle CONFIG_DEVICE = field(ENGINE_CONFIG, "device");
    static final VarHandle CONFIG_OPTIONS = field(ENGINE_CONFIG, "options_json");
    static final VarHandle CONFIG_ALLOC = field(ENGINE_CONFIG, "alloc_device");
    static final VarHandle CONFIG_FREE = field(ENGINE_CONFIG, "free_device");
    static final VarHandle CONFIG_LOG = field(ENGINE_CONFIG, "log");
    static final VarHandle TOKEN_ID = field(TOKEN_RESULT, "token_id");
    static final VarHandle TOKEN_LOGPROBS = field(TOKEN_RESULT, "logprobs");
    static final VarHandle TOKEN_LOGPROBS_LEN = field(TOKEN_RESULT, "logprobs_len");

    static final VarHandle EVENT_ID = field(ENGINE_TOKEN, "token_id");
    static final VarHandle EVENT_TEXT = field(ENGINE_TOKEN, "text");
    static final VarHandle EVENT_TEXT_LEN = field(ENGINE_TOKEN, "text_len");
    static final VarHandle EVENT_LOGPROB = field(ENGINE_TOKEN, "logprob");
    static final VarHandle EVENT_TOP_IDS = field(ENGINE_TOKEN, "top_ids");
    static final VarHandle EVENT_TOP_LOGPROBS = field(ENGINE_TOKEN, "top_logprobs");
    static final VarHandle EVENT_TOP_LEN = field(ENGINE_TOKEN, "top_len");
    static final VarHandle RESULT_FINISH = field(GENERATE_RESULT, "finish_reason");
    static final VarHandle RESULT_PROMPT_TOKENS = field(GENERATE_RESULT, "prompt_tokens");
    static final VarHandle MESSAGE_ROLE = field(CHAT_MESSAGE, "role");
    static final VarHandle MESSAGE_CONTENT = field(CHAT_MESSAGE, "content");

    static final FunctionDescriptor GET_INFO_FN = FunctionDescriptor.of(ADDRESS);
    static final FunctionDescriptor INIT_FN = FunctionDescriptor.of(JAVA_INT, ADDRESS);
    static final FunctionDescriptor LOAD_MODEL_FN = FunctionDescriptor.of(JAVA_INT, ADDRESS);
    static final FunctionDescriptor GENERATE_FN = FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS);
    static final FunctionDescriptor SHUTDOWN_FN = FunctionDescriptor.ofVoid();
    static final FunctionDescriptor GENERATE_STREAM_FN = FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS);
    /** The host's per-token callback (version 2): (user, const EngineToken*) -> 0 go on, else stop. */
    static final FunctionDescriptor ON_TOKEN_FN = FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS);
    /** (messages, count, add_assistant, out, out_size) -> the text's length, CHAT_TEMPLATE_NONE, or an error. */
    static final FunctionDescriptor APPLY_CHAT_TEMPLATE_FN = FunctionDescriptor.of(JAVA_LONG, ADDRESS, JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG);

    /** Callbacks the host gives the engine in EngineConfig. */
    static final FunctionDescriptor ALLOC_DEVICE_FN = FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_LONG);
    static final FunctionDescriptor FREE_DEVICE_FN = FunctionDescriptor.ofVoid(ADDRESS, ADDRESS);
    static final FunctionDescriptor LOG_FN = FunctionDescriptor.ofVoid(ADDRESS, JAVA_INT, ADDRESS);

    private EngineAbi() {
    }

    private static VarHandle field(StructLayout layout, String name) {
        // Coordinates: (MemorySegment, long offset), as every layout var handle since JDK 22.
        return layout.varHandle(groupElement(name));
    }
}
