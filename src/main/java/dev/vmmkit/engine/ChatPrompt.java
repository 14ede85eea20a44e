package dev.vmmkit.engine;

import java.util.List;

/**
 * A chat's messages as one prompt for the engine that serves it: the model's own chat template,
 * which the engine applies (engine_apply_chat_template), or, where the engine has no such call or
 * the model no template it can apply, a plain role-tagged form: {@code role: content} lines, then
 * {@code assistant:}. Either way the text ends where the assistant's reply begins.
 */
record ChatPrompt(List<ChatMessage> messages) implements Completion.Prompt {

    @Override
    public String render(RunningEngine engine) {
        return engine.chatTemplate(messages).orElseGet(() -> plain(messages));
    }

    /** The plain form, the same whatever the dialect and the engine. */
    static String plain(List<ChatMessage> messages) {
        StringBuilder prompt = new StringBuilder();
        for (ChatMessage message : messages) prompt.append(message.role()).append(": ").append(message.content()).append('\n');
        return prompt.append("assistant:").toString();
    }
}
