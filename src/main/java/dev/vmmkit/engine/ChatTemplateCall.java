package dev.vmmkit.engine;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Optional;

/**
 * One engine_apply_chat_template call through FFM: the messages as an array of
 * {@code EngineChatMessage}, and the answer read as the ABI defines it, like snprintf's: a length
 * that does not fit the host's buffer asks for one call more with a buffer that does.
 */
final class ChatTemplateCall {
    /** The first buffer's size: most chats fit, a longer one costs a second call. */
    static final long FIRST_BUFFER = 4096;
    /** A rendered chat longer than this is taken for a broken engine (it must also fit a worker's frame). */
    static final long MAX_TEXT = 32L << 20;

    private ChatTemplateCall() {
    }

    /**
     * The chat as the model's template renders it, ending where the assistant's reply begins; empty
     * where the engine answers ENGINE_CHAT_TEMPLATE_NONE. The caller holds the engine.
     *
     * @throws RequestFailure 500 for an engine error or an answer that breaks the ABI
     */
    static Optional<String> apply(PluginLibrary library, List<ChatMessage> messages, String name) {
        try (Arena call = Arena.ofConfined()) {
            MemorySegment array = call.allocate(EngineAbi.CHAT_MESSAGE, messages.size());
            long stride = EngineAbi.CHAT_MESSAGE.byteSize();
            for (int i = 0; i < messages.size(); i++) {
                EngineAbi.MESSAGE_ROLE.set(array, i * stride, call.allocateFrom(messages.get(i).role()));
                EngineAbi.MESSAGE_CONTENT.set(array, i * stride, call.allocateFrom(messages.get(i).content()));
            }
            long size = FIRST_BUFFER;
            for (int attempt = 0; attempt < 2; attempt++) {
                MemorySegment out = call.allocate(size);
                long length = library.applyChatTemplate(array, messages.size(), true, out, size);
                if (length == EngineAbi.CHAT_TEMPLATE_NONE) return Optional.empty();
                if (length < 0) throw RequestFailure.engineFailed(name + ": " + EngineAbi.APPLY_CHAT_TEMPLATE + " returned error " + length);
                if (length > MAX_TEXT) {
                    throw RequestFailure.engineFailed(name + ": " + EngineAbi.APPLY_CHAT_TEMPLATE + " answered a text of " + length
                            + " bytes, more than " + MAX_TEXT);
                }
                if (length < size) return Optional.of(new String(out.asSlice(0, length).toArray(ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8));
                size = length + 1;
            }
            throw RequestFailure.engineFailed(name + ": " + EngineAbi.APPLY_CHAT_TEMPLATE
                    + " asked for a larger buffer twice for the same messages");
        }
    }
}
